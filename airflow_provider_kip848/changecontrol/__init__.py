"""Change control: what a person approves, who may approve it, and the record of what was done.

* :mod:`.plan`: a migration plan (changes before -> after, steps, preflight) and its hash;
* :mod:`.approvals`: approvers, the four-eyes rule, approval expiry, plan re-checks;
* :mod:`.window`: maintenance windows;
* :mod:`.audit`: the record pair of each change to a cluster (the intent before it, its outcome after), read back;
* :mod:`.audit_trail`: one task try's intents and outcomes, and the intents an earlier try left completed;
* :mod:`.report`: the run report (JSON and Markdown);
* :mod:`.storage`: where snapshots, reports and audit records are written.

Nothing here talks to Kafka on its own: the Airflow layers (operators,
sensors, the example DAGs) hand over what they read and applied, and the
audit trail reads a change's target through the hook they hand it. The rules are
unit-tested without a scheduler.
"""
