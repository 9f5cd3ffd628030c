"""The errors of application controllers: each names the controller and the step, and says whether a retry helps.

A platform refuses in its own words (an exit code and stderr, an SSH
authentication failure, a rollout that stalls). The provider turns each into a
:class:`ControllerError` that keeps those words (redacted), names the
controller (its registry name and kind) and the step (``stop``, ``start``,
``roll``, ``status``, ``config``), and carries ``retriable``: True when the
same step may succeed later (a host not reachable yet, a command that timed
out), False when a retry would only repeat the refusal (a wrong key, a command
that exits non-zero, output that cannot be read).
"""

from __future__ import annotations

from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error


class ControllerError(Kip848Error):
    """A controller's step failed on the platform."""

    remedy = ("Check the application's platform (the host, the process manager, the command's output above), "
              "then rerun the task: every step is idempotent.")

    def __init__(self, what: str, *, controller: str, step: str, retriable: bool = False,
                 remedy: str | None = None) -> None:
        self.controller, self.step = controller, step
        self.retriable = retriable
        super().__init__(f"controller {controller!r}, step {step}: {what}", remedy=remedy)


class PlatformError(Kip848Error):
    """Raised by a controller implementation when its platform refused or failed (a command's exit code, an API
    error, output that cannot be read); :class:`~.named.NamedController` turns it into a
    :class:`ControllerError` naming the controller and the step. ``retriable`` as the implementation knows it."""

    def __init__(self, what: str, *, retriable: bool = False, remedy: str | None = None) -> None:
        self.retriable = retriable
        super().__init__(what, remedy=remedy)


class ControllerRefused(InvalidArgument):
    """A run or an ownership map named a controller the deployment does not provide, or gave it an argument it
    does not declare: refused before anything runs."""

    remedy = ("Name a controller of the deployment's registry (its administrators have the names; "
              "docs/controllers.md) with only the arguments it declares; a run never names code.")


class ControllerRegistryInvalid(InvalidArgument):
    """The deployment's controller registry cannot be read, or one of its entries is not valid."""

    remedy = "Fix the controller registry named by [kip848] controllers (docs/controllers.md describes its format)."


__all__ = ["ControllerError", "ControllerRefused", "ControllerRegistryInvalid", "PlatformError"]
