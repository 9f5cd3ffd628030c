"""The release's class-data archive (KafkaDistribution.class_data_archive): dumped once, mapped by every Kafka JVM,
and never in the way: a JVM that cannot map it runs as before, with nothing of CDS on a tool's stdout."""

from __future__ import annotations

import re
import shutil
import subprocess

from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution
from airflow_provider_kip848.kafka.cli.java import find_java

EPOCH = re.compile(r"Epoch: \d+")


def test_the_archive_is_dumped_once_and_every_tool_maps_it(kafka, kafka_version):
    dist = KafkaDistribution(kafka_version)
    dist.ensure()  # the session broker's start already dumped it
    archive = dist.class_data_archive(find_java())
    assert archive.is_file() and not archive.with_suffix(".failed").exists()
    dumped = archive.stat().st_mtime_ns
    dist.ensure()
    assert archive.stat().st_mtime_ns == dumped  # not dumped again

    cmd = kafka.tool_command("kafka-consumer-groups", ["--list"])
    assert f"-XX:SharedArchiveFile={archive}" in cmd
    # -Xshare:on fails the JVM when it cannot map the archive: this proves the archive fits this JVM and classpath,
    # and class+load logging shows the tool's own classes come from it
    mapped = [*cmd[:1], "-Xshare:on", "-Xlog:class+load=info:file=/dev/stderr", *cmd[1:]]
    proc = subprocess.run(mapped, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    tool_class = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "
    assert f"{tool_class}source: shared objects file" in proc.stderr


def test_an_archive_the_jvm_cannot_map_changes_nothing(kafka, kafka_version, tmp_path):
    """A corrupt archive (or one of another JVM build): the tool runs without it and its stdout is the same."""
    real = KafkaDistribution(kafka_version)
    dist = KafkaDistribution(kafka_version, cache_dir=tmp_path)
    dist.home.mkdir(parents=True)
    (dist.home / "libs").symlink_to(real.libs_dir)
    shutil.copy(real.home / "resolved.json", dist.home / "resolved.json")
    shutil.copytree(real.config_dir, dist.config_dir)
    archive = dist.class_data_archive(find_java())
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"not an archive" * 100)

    args = ["--bootstrap-server", kafka.bootstrap_servers, "describe"]
    ours = subprocess.run(dist.tool_command("kafka-features", args), capture_output=True, text=True, timeout=120)
    plain = KafkaDistribution(kafka_version, class_data_sharing=False).tool_command("kafka-features", args)
    assert not any(arg.startswith("-XX:SharedArchiveFile") for arg in plain)
    theirs = subprocess.run(plain, capture_output=True, text=True, timeout=120)
    assert ours.returncode == theirs.returncode == 0, ours.stdout + ours.stderr
    assert "group.version" in ours.stdout
    # the same lines (but the metadata Epoch column, which moves on): no "[warning][cds]" or other JVM line is added
    assert [EPOCH.sub("", line) for line in ours.stdout.splitlines()] == \
        [EPOCH.sub("", line) for line in theirs.stdout.splitlines()]
