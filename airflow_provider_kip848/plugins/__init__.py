"""Airflow plugins of the provider (the top layer: they may use hooks and everything below).

:mod:`~airflow_provider_kip848.plugins.fleet_view` is registered through the package's ``airflow.plugins``
entry point (pyproject.toml), the way Airflow 3 loads plugins of installed packages whatever
``[core] lazy_discover_providers`` says.
"""
