"""Thin Airflow hooks over :mod:`airflow_provider_kip848.kafka` (connection -> client settings -> core)."""
