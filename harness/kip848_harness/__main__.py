"""Command line of the embedded local Kafka (also the console script ``kip848-local``, the harness's).

    python -m kip848_harness kafka fetch   [--version V]
    python -m kip848_harness kafka start   [--nodes N] [--version V] [--port P] [--controller-port P]
                                         [--tuning fast|production] [--fresh] [--name N]
                                         [--metrics | --no-metrics]
    python -m kip848_harness kafka status  [--name N]
    python -m kip848_harness kafka stop    [--name N]
    python -m kip848_harness kafka node stop|kill|pause|resume|start|restart ID [--name N]
    python -m kip848_harness kafka cli TOOL [ARGS...]    (e.g. kafka-features describe)
    python -m kip848_harness kafka wordcount [--application-id A] [--group-protocol streams|classic]

Every failure prints one line ``error: <what is wrong>. <what to do>`` and exits 2.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from airflow_provider_kip848.kafka.cache import default_cache_dir
from airflow_provider_kip848.kafka.cli.distribution import DEFAULT_KAFKA_VERSION, KAFKA_TOOLS, KafkaDistribution
from airflow_provider_kip848.kafka.errors import Kip848Error
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.kafka_state import BrokerStatus


def instance_dir(name: str) -> Path:
    return default_cache_dir() / "instances" / name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kip848_harness",
                                     description=__doc__.split("\n")[0])
    top = parser.add_subparsers(dest="component", required=True)
    kafka = top.add_parser("kafka", help="the embedded Apache Kafka broker")
    sub = kafka.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, version: bool = True) -> None:
        p.add_argument("--name", default="default", help="instance name (its work dir is <cache>/instances/NAME)")
        p.add_argument("--workdir", type=Path, help="explicit work directory (overrides --name)")
        if version:
            p.add_argument(
                "--version",
                dest="kafka_version",
                default=os.environ.get("KIP848_KAFKA_VERSION", DEFAULT_KAFKA_VERSION),
                help="Kafka release (default %(default)s; env KIP848_KAFKA_VERSION)",
            )

    p = sub.add_parser("fetch", help="resolve the Kafka jars with Maven into the cache")
    p.add_argument("--version", dest="kafka_version",
                   default=os.environ.get("KIP848_KAFKA_VERSION", DEFAULT_KAFKA_VERSION))

    p = sub.add_parser("start", help="format (if new) and start a KRaft cluster, wait until every node answers")
    common(p)
    p.add_argument("--nodes", type=int, default=1,
                   help="combined broker+controller nodes, one quorum (default 1; 3 survives the loss of one)")
    p.add_argument("--port", type=int, default=0, help="broker port (0 = a free one)")
    p.add_argument("--controller-port", type=int, default=0, help="controller port (0 = a free one)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--tuning", choices=["fast", "production"], default="fast")
    p.add_argument("--heap", default="512m")
    p.add_argument("--fresh", action="store_true", help="discard the instance's data and start a new cluster")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="extra broker config")
    p.add_argument("--metrics", action=argparse.BooleanOptionalAction, default=None,
                   help="serve each node's group-coordinator metrics in Prometheus text format (the Prometheus JMX "
                        "exporter's Java agent, a free port per node); default: as the instance was last started")

    for name, help_ in (("stop", "stop the broker this launcher started"), ("status", "show whether it runs")):
        p = sub.add_parser(name, help=help_)
        common(p, version=False)

    p = sub.add_parser("node", help="act on one node of a running cluster (a crash, a pause, a restart)")
    common(p, version=False)
    p.add_argument("action", choices=["stop", "kill", "pause", "resume", "start", "restart"])
    p.add_argument("node_id", type=int, metavar="ID")

    p = sub.add_parser("cli", help="run a Kafka CLI tool on the same classpath", add_help=False)
    p.add_argument("tool", choices=sorted(KAFKA_TOOLS), metavar="TOOL")
    p.add_argument("args", nargs=argparse.REMAINDER)

    p = sub.add_parser("wordcount", help="run Kafka's WordCountDemo Streams app in the foreground")
    common(p, version=False)
    p.add_argument("--application-id", default="streams-wordcount")
    p.add_argument("--group-protocol", choices=["streams", "classic"], default="streams")
    return parser


def _broker(args: argparse.Namespace) -> LocalKafka:
    """The instance named on the command line, with the Kafka version it was started with."""
    return LocalKafka.existing(args.workdir or instance_dir(args.name))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # ``cli`` passes everything after the tool name through untouched (including --name).
    if len(argv) >= 2 and argv[:2] == ["kafka", "cli"]:
        return _cli(argv[2:])
    args = _parser().parse_args(argv)
    try:
        if args.command == "fetch":
            report = KafkaDistribution(args.kafka_version).ensure()
            how = "fetched with Maven" if report.fetched else "already cached"
            print(f"Kafka {report.version}: {report.jars} jars in {report.libs_dir} ({how}, {report.seconds:.1f} s)")
        elif args.command == "start":
            overrides = dict(kv.split("=", 1) for kv in args.config)
            kafka = LocalKafka(
                args.workdir or instance_dir(args.name),
                version=args.kafka_version,
                nodes=args.nodes,
                port=args.port,
                controller_port=args.controller_port,
                host=args.host,
                tuning=args.tuning,
                heap=args.heap,
                overrides=overrides,
                metrics=args.metrics,
            )
            started = kafka.start(fresh=args.fresh)
            print(started.summary())
            print(f"bootstrap.servers={started.bootstrap_servers}")
            if started.metrics_url:
                print(f"metrics_url={started.metrics_url}")
        elif args.command == "stop":
            kafka = _broker(args)
            stopped = kafka.stop()
            print(f"stopped the broker in {kafka.workdir}" if stopped else f"no broker running in {kafka.workdir}")
        elif args.command == "status":
            return _print_status(_broker(args).status())
        elif args.command == "node":
            kafka = _broker(args)
            action = {"stop": kafka.stop_node, "kill": kafka.kill_node, "pause": kafka.pause_node,
                      "resume": kafka.resume_node, "start": kafka.start_node, "restart": kafka.restart_node}
            outcome = action[args.action](args.node_id)
            took = f" ({outcome:.1f} s)" if isinstance(outcome, float) else ""
            print(f"node {args.node_id}: {args.action} done{took}")
        elif args.command == "wordcount":
            kafka = _broker(args)
            app = kafka.start_wordcount(args.application_id, group_protocol=args.group_protocol)
            print(f"WordCountDemo ({args.group_protocol}) pid {app.process.pid}, log {app.log_path}; Ctrl-C stops it")
            try:
                return app.process.wait()
            except KeyboardInterrupt:
                return app.stop()
        return 0
    except Kip848Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _print_status(st: BrokerStatus) -> int:
    """Print a cluster's status (each node's too when it has several); 1 when it is not running."""
    if len(st.nodes) > 1:
        for n in st.nodes:
            state = "paused" if n.paused else "running" if n.running else "stopped"
            print(f"node {n.node_id}: {state}, pid {n.pid or '-'}, {n.bootstrap_server}, "
                  f"{'answering' if n.answering else 'not answering'}; log {n.log_path}"
                  + (f"; metrics {n.metrics_url}" if n.metrics_url else ""))
    if not st.running:
        print(f"not running ({st.detail}) in {st.workdir}")
        return 1
    print(f"running: Kafka {st.version} pid {st.pid} at {st.bootstrap_servers} "
          f"({'answering' if st.answering else 'not answering'}); log {st.log_path}")
    urls = [n.metrics_url for n in st.nodes if n.metrics_url]
    if urls:
        print(f"metrics_url={','.join(urls)}")
    return 0


def _cli(rest: list[str]) -> int:
    """``kafka cli [--name N] TOOL ARGS...``: exec the tool; adds --bootstrap-server of a running instance."""
    name = "default"
    if len(rest) >= 2 and rest[0] == "--name":
        name, rest = rest[1], rest[2:]
    if not rest or rest[0] in ("-h", "--help"):
        print("usage: python -m kip848_harness kafka cli [--name N] TOOL [ARGS...]\n"
              f"tools: {', '.join(sorted(KAFKA_TOOLS))}")
        return 0 if rest else 2
    tool, tool_args = rest[0], rest[1:]
    try:
        kafka = LocalKafka.existing(instance_dir(name))
        if any(n.running for n in kafka.status().nodes):  # a cluster with a node down still answers
            cmd = kafka.tool_command(tool, tool_args)
        else:
            dist = kafka.distribution
            dist.ensure()
            cmd = dist.tool_command(tool, tool_args)
    except Kip848Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
