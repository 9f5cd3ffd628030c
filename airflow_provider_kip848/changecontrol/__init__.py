"""Change control: what a person approves, who may approve it, and the record of what was done.

* :mod:`.plan`: a migration plan (changes before -> after, steps, preflight) and its hash;
* :mod:`.approvals`: approvers, the four-eyes rule, approval expiry, plan re-checks;
* :mod:`.window`: maintenance windows;
* :mod:`.audit`: one record per change applied to a cluster;
* :mod:`.report`: the run report (JSON and Markdown);
* :mod:`.storage`: where snapshots, reports and audit records are written.

Nothing here talks to Kafka: the Airflow layers (operators, sensors, the
example DAGs) hand over what they read and applied. The rules are
unit-tested without a scheduler.
"""
