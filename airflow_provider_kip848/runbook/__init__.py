"""What the example DAGs share: plans an approver reads, maintenance windows, run reports.

Kept out of the DAG files so the runbooks read as runbooks, and unit-tested
without a scheduler.
"""
