"""The migration engine: a migration's steps once, for one group and for a fleet.

* :mod:`.state`: the steps (:class:`~.state.Step`), the order each path takes them, and the typed state of
  one application's move (:class:`~.state.MoveState`), JSON both ways;
* :mod:`.offsets`: snapshot, compare and restore (the single-group tasks and the fleet's moves alike);
* :mod:`.application`: the last look before a start; :mod:`.lock`: the change lock's owner and stale holders;
* :mod:`.move`: :class:`~.move.ApplicationMove`, one application's move through its steps, waiting in as few
  deferrals as the steps allow and taken up at its recorded step after a lost task.

Layer 3 (docs/index.md): it uses hooks, controllers, change control and the fleet's records; the operators
and sensors use it.
"""
