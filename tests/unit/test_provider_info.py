"""The provider as Airflow itself discovers it (real ProvidersManager, no mocks)."""

from __future__ import annotations

from importlib.metadata import distribution, entry_points

from airflow_provider_kip848.get_provider_info import get_provider_info
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook


def test_entry_point_points_at_get_provider_info():
    eps = [ep for ep in entry_points(group="apache_airflow_provider") if ep.dist.name == "airflow-provider-kip848"]
    assert [ep.value for ep in eps] == ["airflow_provider_kip848.get_provider_info:get_provider_info"]
    assert eps[0].load()() == get_provider_info()


def test_package_name_matches_distribution_and_version():
    info = get_provider_info()
    dist = distribution("airflow-provider-kip848")
    assert info["package-name"] == dist.metadata["Name"]
    assert info["versions"] == [dist.version]


def test_connection_type_matches_hook_class():
    (conn,) = get_provider_info()["connection-types"]
    assert conn["connection-type"] == KafkaGroupAdminHook.conn_type == "kafka_admin"
    module, _, cls = conn["hook-class-name"].rpartition(".")
    assert module == KafkaGroupAdminHook.__module__ and cls == KafkaGroupAdminHook.__name__
    for module in get_provider_info()["hooks"][0]["python-modules"]:
        __import__(module)
    # secrets are declared as such so Airflow masks them in the UI and logs
    assert conn["conn-fields"]["ssl_key_password"]["schema"]["format"] == "password"
    assert conn["ui-field-behaviour"]["relabeling"]["host"] == "Bootstrap servers"


def test_airflow_providers_manager_discovers_provider_hook_and_form():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    pm = ProvidersManager()
    assert "airflow-provider-kip848" in pm.providers
    hook_info = ProvidersManagerTaskRuntime().hooks["kafka_admin"]
    assert hook_info is not None
    assert hook_info.hook_class_name == "airflow_provider_kip848.hooks.admin.KafkaGroupAdminHook"
    assert hook_info.connection_id_attribute_name == "kafka_conn_id"
    widgets = pm.connection_form_widgets
    assert "extra__kafka_admin__security_protocol" in widgets
    assert widgets["extra__kafka_admin__ssl_key_password"].is_sensitive
    assert not widgets["extra__kafka_admin__security_protocol"].is_sensitive
    behaviour = pm.field_behaviours["kafka_admin"]
    assert "schema" in behaviour["hidden_fields"]


def test_every_operator_module_is_declared():
    """Airflow lists a provider's operators from its provider info: a module of operators left out of it is
    invisible there (the control: base.py holds only the shared base class, which is not a task to use)."""
    import ast
    from pathlib import Path

    import airflow_provider_kip848.operators as package

    declared = set(get_provider_info()["operators"][0]["python-modules"])
    with_operators = set()
    for path in Path(package.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        if any(isinstance(node, ast.ClassDef) and node.name.endswith("Operator") and not node.name.startswith("_")
               for node in tree.body) and path.stem != "base":
            with_operators.add(f"airflow_provider_kip848.operators.{path.stem}")
    assert with_operators and with_operators == declared
    for module in declared:
        __import__(module)
