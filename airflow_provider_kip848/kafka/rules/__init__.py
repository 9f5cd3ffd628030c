"""The judges: pure functions over facts read from the cluster.

Feature-change plans (:mod:`.features`), group-config validation
(:mod:`.group_configs`), offset rules, compare and restore (:mod:`.offsets`),
migration preflight (:mod:`.preflight`), the readiness verdict of each migration of a group
(:mod:`.readiness`, an inventory's), client-config lint (:mod:`.lint`) and
the conditions sensors wait for (:mod:`.conditions`). Nothing here does I/O:
:mod:`..api` reads the facts through a backend and hands them over, so every
rule is unit-testable on recorded facts.
"""
