"""The Spark standalone harness without starting it: where it points the Spark provider, and its state file.

Starting the real cluster is tested in tests/integration/test_spark_cluster.py.
"""

from __future__ import annotations

import json
import os

import pytest

from kip848_harness.spark_cluster import LocalSparkCluster, SparkClusterError, _free_ports, spark_home

STATE = {"host": "127.0.0.1", "master_port": 17077, "ui_port": 18080, "rest_port": 16066,
         "worker_ui_ports": [18081, 18082], "master_pid": None, "worker_pids": [None, None]}


def recorded(tmp_path) -> LocalSparkCluster:
    (tmp_path / "state.json").write_text(json.dumps(STATE))
    return LocalSparkCluster.existing(tmp_path)


def test_the_spark_home_is_the_installed_pyspark_with_its_launcher_and_jars():
    import pyspark

    home = spark_home()
    assert str(home) == os.path.dirname(pyspark.__file__)
    assert (home / "bin" / "spark-class").is_file() and any((home / "jars").glob("spark-core_*.jar"))


def test_a_recorded_cluster_gives_its_urls_and_the_spark_providers_connection(tmp_path, monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    cluster = recorded(tmp_path)
    assert cluster.workers == 2
    assert (cluster.master_url, cluster.ui_url, cluster.rest_url) == (
        "spark://127.0.0.1:17077", "http://127.0.0.1:18080", "http://127.0.0.1:16066")
    assert cluster.driver_conf()["spark.master"] == cluster.master_url
    for mode in ("client", "cluster"):
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps(cluster.airflow_connection(mode)))
        resolved = SparkSubmitHook(conn_id="spark_test")._connection
        assert resolved["master"] == "spark://127.0.0.1:17077" and resolved["deploy_mode"] == mode
        # cluster mode: the provider polls the driver's state on the master's REST server
        assert resolved["rest_endpoint"] == ("http://127.0.0.1:16066" if mode == "cluster" else None)
    with pytest.raises(ValueError, match="client or cluster"):
        cluster.airflow_connection("yarn")


def test_stopping_a_recorded_cluster_whose_processes_are_gone_forgets_it(tmp_path):
    cluster = recorded(tmp_path)
    assert cluster.stop() is True
    assert not (tmp_path / "state.json").exists()
    with pytest.raises(SparkClusterError, match="no Spark cluster was started"):
        LocalSparkCluster.existing(tmp_path)
    with pytest.raises(SparkClusterError, match="not started"):
        _ = LocalSparkCluster(tmp_path).master_url


def test_free_ports_are_distinct():
    ports = _free_ports("127.0.0.1", 6)
    assert len(set(ports)) == 6 and all(p > 0 for p in ports)
