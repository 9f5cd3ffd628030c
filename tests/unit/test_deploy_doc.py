"""docs/deploy.md and the deploy tier's set-up (tests/deploy/deployment.py) follow the same steps: what can be compared
mechanically is compared here, so that neither changes without the other.

* the airflow.cfg block of the page has exactly the tier's keys, minus those the tier names as its own
  (``deployment.TIER_ONLY``, each with its reason); a value that is not a placeholder (``<...>``, or a path or URL
  that is the deployment's own) is the tier's value;
* the build and install commands are the tier's (uv build --wheel, the constraints file, the extras, the packages);
* the component commands are the tier's;
* the DAG table lists every DAG of dags/.
"""

from __future__ import annotations

import configparser
import re

import pytest

from tests.conftest import REPO
from tests.deploy.deployment import (
    COMPONENTS,
    CONSTRAINTS,
    DEPLOYMENT_PACKAGES,
    EXTRAS,
    TIER_ONLY,
    USERS,
    WORKER_COMMAND,
    airflow_cfg,
)

DOC = (REPO / "docs" / "deploy.md").read_text()
#: keys whose value in the page is the deployment's own (hosts, secrets, paths): compared by their form only
OWN_VALUES = {("core", "fernet_key"), ("core", "simple_auth_manager_passwords_file"), ("api", "secret_key"),
              ("api_auth", "jwt_secret"), ("kip848", "controllers"), ("kip848", "ownership_dir")}
#: keys whose value is a URL: the page's and the tier's share their scheme and their path
URLS = {("core", "execution_api_server_url"), ("api", "base_url"), ("database", "sql_alchemy_conn"),
        ("celery", "broker_url"), ("celery", "result_backend")}


def doc_cfg() -> dict[tuple[str, str], str]:
    blocks = re.findall(r"```ini\n(.*?)```", DOC, re.S)
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(blocks[0])  # section 5's; the later one is section 12's example
    return {(s, k): v for s in parser.sections() for k, v in parser.items(s)}


def tier_cfg() -> dict[tuple[str, str], str]:
    cfg = airflow_cfg(api="http://127.0.0.1:8080", db="127.0.0.1:5432", redis="127.0.0.1:6379", fernet_key="f",
                      secret_key="s", jwt_secret="j", passwords_file="/p.json", controllers="/c.yaml",
                      ownership_dir="/o")
    return {(s, k): v for s, options in cfg.items() for k, v in options.items()}


def test_the_airflow_cfg_of_the_page_is_the_tiers():
    doc, tier = doc_cfg(), tier_cfg()
    assert set(TIER_ONLY) <= set(tier) and all(TIER_ONLY.values())
    assert set(doc) == set(tier) - set(TIER_ONLY), (set(doc) ^ (set(tier) - set(TIER_ONLY)))
    for key, value in doc.items():
        if key in OWN_VALUES:
            continue
        if key in URLS:
            scheme = value.split("://")[0]
            assert scheme == tier[key].split("://")[0], key
            assert re.sub(r"^[^/]*//[^/]*", "", value) == re.sub(r"^[^/]*//[^/]*", "", tier[key]), key
            continue
        assert value == tier[key], key
    assert doc[("core", "simple_auth_manager_users")] == ",".join(f"{u}:{r}" for u, r in USERS.items())
    assert doc[("core", "test_connection")] == "Enabled"
    assert "KIP848_ARTIFACTS_URL" in DOC


def test_the_build_install_and_component_commands_are_the_tiers():
    assert re.search(r"uv build --wheel --out-dir dist \.", DOC)
    install = re.search(r"uv pip install (.*?)\n```", DOC, re.S)
    assert install, "no uv pip install command"
    words = install.group(1).replace("\\\n", " ").split()
    assert words[words.index("-c") + 1] == str(CONSTRAINTS.relative_to(REPO))
    assert any(w.endswith(f'.whl)[{EXTRAS}]"') for w in words), words
    assert [w for w in words if w in DEPLOYMENT_PACKAGES] == list(DEPLOYMENT_PACKAGES)
    table = DOC.split("## 7. Components")[1].split("\n\n")[1]
    for component in COMPONENTS:
        assert f"`airflow {component}" in table, component
    assert f"`airflow {' '.join(WORKER_COMMAND)}`" in table


@pytest.mark.parametrize("dag_id", sorted(p.stem for p in (REPO / "dags").glob("*.py")))
def test_every_dag_is_in_the_table(dag_id):
    table = DOC.split("## 6. The DAGs")[1].split("## 7.")[0]
    assert f"| `{dag_id}` |" in table
