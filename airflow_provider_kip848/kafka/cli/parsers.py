"""Parse the Kafka 4.x CLI tools' text output into the same typed results as the native backend.

The group tools print fixed-width tables whose column widths follow the
longest value, but some cells may be empty (a member without
``group.instance.id``) and a few hold spaces (``COORDINATOR (ID)`` is
``host:port  (1)``; streams ``ASSIGNMENTS`` is free text, always last). A row
is therefore split on whitespace when that gives exactly one token per
column, and cut at the header's column positions otherwise. Recorded real
output of every table parsed here is in ``tests/unit/fixtures/cli``.
"""

from __future__ import annotations

import re

from airflow_provider_kip848.kafka.model import (
    METADATA_VERSION_NAMES,
    ClusterFeatures,
    ConfigEntry,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    Feature,
    GroupConfig,
    GroupListing,
    GroupOffsets,
    GroupType,
    MemberProtocol,
    PartitionOffsets,
    StreamsGroupDescription,
    StreamsGroupMember,
    StreamsTask,
    TaskAssignment,
    TopicPartition,
    normalize_state,
    partitions,
)

_METADATA_LEVELS = {name: level for level, name in METADATA_VERSION_NAMES.items()}
_MULTI_WORD_HEADERS = ("COORDINATOR (ID)",)
_REST_OF_LINE_COLUMNS = ("ASSIGNMENTS",)
_COORDINATOR_CELL = re.compile(r"(\S+)\s+(\(\d+\))")


# -- generic table -----------------------------------------------------------------


def parse_table(text: str, first_header: str = "GROUP") -> list[dict[str, str]]:
    """Rows of the first table whose header line starts with ``first_header``, as column -> cell."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(first_header + " ") or line.strip() == first_header:
            header_line = line.rstrip()
            body = [ln for ln in lines[i + 1:] if ln.strip()]
            break
    else:
        return []
    protected = header_line
    for multi in _MULTI_WORD_HEADERS:
        protected = protected.replace(multi, multi.replace(" ", "_"))
    names, starts = [], []
    for m in re.finditer(r"\S+", protected):
        names.append(m.group(0).replace("_(", " ("))
        starts.append(m.start())
    rows = []
    for line in body:
        rows.append(_split_row(line.rstrip(), names, starts))
    return rows


def _split_row(line: str, names: list[str], starts: list[int]) -> dict[str, str]:
    rest_col = names[-1] in _REST_OF_LINE_COLUMNS
    work = _COORDINATOR_CELL.sub(lambda m: f"{m.group(1)}\x00{m.group(2)}", line)
    tokens = work.split()
    fixed = len(names) - 1 if rest_col else len(names)
    if rest_col and len(tokens) >= fixed:
        head = tokens[:fixed]
        # the free-text last column starts after the fixed cells
        pos = 0
        for tok in head:
            pos = work.index(tok, pos) + len(tok)
        values = [*head, work[pos:].strip()]
        return {n: c.replace("\x00", " ") for n, c in zip(names, values, strict=False)}
    if len(tokens) == len(names):
        return {n: t.replace("\x00", " ") for n, t in zip(names, tokens, strict=True)}
    # an empty cell somewhere: cut at the header's column starts
    cells: dict[str, str] = {}
    for j, name in enumerate(names):
        end = starts[j + 1] if j + 1 < len(starts) else None
        cells[name] = line[starts[j]:end].strip() if len(line) > starts[j] else ""
    return cells


def _dash_none(value: str | None) -> str | None:
    return None if value in (None, "", "-") else value


def _int(value: str | None) -> int | None:
    value = _dash_none(value)
    return int(value) if value is not None else None


# -- kafka-features ----------------------------------------------------------------

_FEATURE_RE = re.compile(
    r"^Feature:\s+(?P<name>\S+)\s+SupportedMinVersion:\s+(?P<min>\S+)\s+SupportedMaxVersion:\s+(?P<max>\S+)"
    r"\s+FinalizedVersionLevel:\s+(?P<fin>\S+)\s+Epoch:\s+(?P<epoch>\S+)",
    re.M,
)


def _level(name: str, raw: str) -> int:
    if name == "metadata.version" and raw in _METADATA_LEVELS:
        return _METADATA_LEVELS[raw]
    return int(raw) if raw not in ("-", "") else 0


def parse_features_describe(text: str) -> ClusterFeatures:
    """``kafka-features describe``."""
    features = {}
    for m in _FEATURE_RE.finditer(text):
        name = m.group("name")
        features[name] = Feature(
            name=name,
            supported_min=_level(name, m.group("min")),
            supported_max=_level(name, m.group("max")),
            finalized_level=_level(name, m.group("fin")),
            epoch=_int(m.group("epoch")),
        )
    return ClusterFeatures(features)


# -- kafka-configs -------------------------------------------------------------------

_CONFIG_LINE_RE = re.compile(
    r"^\s+(?P<name>[^=\s]+)=(?P<value>.*?) sensitive=(?P<sensitive>true|false) synonyms=\{(?P<synonyms>.*)\}\s*$"
)


def parse_config_entries(text: str) -> dict[str, ConfigEntry]:
    """``kafka-configs --describe [--all]`` lines ``  name=value sensitive=... synonyms={SOURCE:k=v, ...}``."""
    entries = {}
    for line in text.splitlines():
        m = _CONFIG_LINE_RE.match(line)
        if not m:
            continue
        synonyms = m.group("synonyms")
        source = synonyms.split(":", 1)[0].strip() if synonyms else "UNKNOWN"
        value = m.group("value")
        entries[m.group("name")] = ConfigEntry(
            name=m.group("name"),
            value=None if value == "null" else value,
            source=source,
            sensitive=m.group("sensitive") == "true",
        )
    return dict(sorted(entries.items()))


def parse_group_config(group_id: str, text: str) -> GroupConfig:
    return GroupConfig(group_id=group_id, entries=parse_config_entries(text))


# -- group listings --------------------------------------------------------------------


def parse_groups_list(text: str, states: dict[str, str] | None = None) -> list[GroupListing]:
    """``kafka-groups --list`` (GROUP TYPE PROTOCOL), with states from the per-type ``--list --state`` tables."""
    states = states or {}
    out = []
    for row in parse_table(text):
        gid = row["GROUP"]
        out.append(GroupListing(
            group_id=gid,
            type=GroupType.parse(row.get("TYPE")),
            state=normalize_state(states.get(gid)),
            protocol_type=row.get("PROTOCOL", ""),
        ))
    return sorted(out, key=lambda g: g.group_id)


def parse_list_states(text: str) -> dict[str, str]:
    """``kafka-{consumer,streams,share}-groups --list --state``: group -> state."""
    return {row["GROUP"]: row.get("STATE", "") for row in parse_table(text)}


# -- consumer groups -----------------------------------------------------------------------


def parse_assignment(cell: str | None) -> tuple[TopicPartition, ...]:
    """``t-a:0,1;t-b:0`` -> partitions; ``-`` or empty -> ()."""
    cell = _dash_none(cell)
    if cell is None:
        return ()
    pairs: list[tuple[str, int]] = []
    for chunk in cell.split(";"):
        if not chunk.strip():
            continue
        topic, _, parts = chunk.rpartition(":")
        pairs.extend((topic, int(p)) for p in parts.split(",") if p.strip())
    return partitions(pairs)


def parse_consumer_group(group_id: str, state_text: str, members_text: str) -> ConsumerGroupDescription:
    """``kafka-consumer-groups --describe --state --verbose`` plus ``--members --verbose``."""
    state_rows = [r for r in parse_table(state_text) if r.get("GROUP") == group_id]
    if not state_rows:
        raise ValueError(f"no state row for group {group_id!r} in the tool output")
    st = state_rows[0]
    has_epochs = _dash_none(st.get("GROUP-EPOCH")) is not None
    members = []
    for row in parse_table(members_text):
        if row.get("GROUP") != group_id:
            continue
        upgraded = row.get("UPGRADED")
        if upgraded in ("true", "false"):
            protocol = MemberProtocol.CONSUMER if upgraded == "true" else MemberProtocol.CLASSIC
        else:
            protocol = MemberProtocol.CONSUMER if has_epochs else MemberProtocol.CLASSIC
        members.append(ConsumerGroupMember(
            member_id=row["CONSUMER-ID"],
            client_id=row.get("CLIENT-ID", ""),
            host=(row.get("HOST") or "").lstrip("/"),
            instance_id=_dash_none(row.get("GROUP-INSTANCE-ID")),
            assignment=parse_assignment(row.get("CURRENT-ASSIGNMENT")),
            target_assignment=parse_assignment(row.get("TARGET-ASSIGNMENT")) if has_epochs else None,
            member_epoch=_int(row.get("CURRENT-EPOCH")),
            protocol=protocol,
        ))
    coordinator = re.search(r"\((\d+)\)", st.get("COORDINATOR (ID)", ""))
    return ConsumerGroupDescription(
        group_id=group_id,
        type=GroupType.CONSUMER if has_epochs else GroupType.CLASSIC,
        state=normalize_state(st.get("STATE")),
        assignor=_dash_none(st.get("ASSIGNMENT-STRATEGY")) or "",
        coordinator_id=int(coordinator.group(1)) if coordinator else None,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        group_epoch=_int(st.get("GROUP-EPOCH")),
        target_assignment_epoch=_int(st.get("TARGET-ASSIGNMENT-EPOCH")),
    )


def parse_group_offsets(group_id: str, text: str, log_start: dict[TopicPartition, int] | None = None) -> GroupOffsets:
    """``kafka-{consumer,streams}-groups --describe --offsets --verbose``; log start from ``kafka-get-offsets``."""
    log_start = log_start or {}
    rows = []
    for row in parse_table(text):
        if row.get("GROUP") != group_id:
            continue
        tp = TopicPartition(row["TOPIC"], int(row["PARTITION"]))
        rows.append(PartitionOffsets(
            topic=tp.topic,
            partition=tp.partition,
            committed=_int(row.get("CURRENT-OFFSET")),
            log_start=log_start.get(tp),
            log_end=_int(row.get("LOG-END-OFFSET")),
            leader_epoch=_int(row.get("LEADER-EPOCH")),
        ))
    return GroupOffsets(group_id=group_id, partitions=tuple(sorted(rows, key=lambda p: (p.topic, p.partition))))


_GET_OFFSETS_RE = re.compile(r"^(?P<topic>.+):(?P<partition>\d+):(?P<offset>-?\d+)$", re.M)


def parse_get_offsets(text: str) -> dict[TopicPartition, int]:
    """``kafka-get-offsets`` lines ``topic:partition:offset``."""
    return {TopicPartition(m.group("topic"), int(m.group("partition"))): int(m.group("offset"))
            for m in _GET_OFFSETS_RE.finditer(text)}


# -- streams groups ---------------------------------------------------------------------------

_TASKS_RE = re.compile(r"(?P<kind>(?:TARGET-)?(?:ACTIVE|STANDBY|WARMUP)):\s*(?P<tasks>(?:[^:\s;]+:\[[^\]]*\];\s*)*)")
_TASK_RE = re.compile(r"(?P<sub>[^:\s;]+):\[(?P<parts>[^\]]*)\]")


def parse_streams_assignments(cell: str) -> tuple[TaskAssignment, TaskAssignment | None]:
    """``ACTIVE: 0:[0,1]; 1:[0,1]; TARGET-ACTIVE: ...`` -> (current, target)."""
    found: dict[str, tuple[StreamsTask, ...]] = {}
    for m in _TASKS_RE.finditer(cell or ""):
        tasks = [StreamsTask(t.group("sub"), int(p)) for t in _TASK_RE.finditer(m.group("tasks"))
                 for p in t.group("parts").split(",") if p.strip()]
        found[m.group("kind")] = tuple(sorted(tasks))
    current = TaskAssignment(found.get("ACTIVE", ()), found.get("STANDBY", ()), found.get("WARMUP", ()))
    has_target = any(k.startswith("TARGET-") for k in found)
    target = TaskAssignment(found.get("TARGET-ACTIVE", ()), found.get("TARGET-STANDBY", ()),
                            found.get("TARGET-WARMUP", ())) if has_target else None
    return current, target


def parse_streams_group(group_id: str, state_text: str, members_text: str) -> StreamsGroupDescription:
    """``kafka-streams-groups --describe --state --verbose`` plus ``--members --verbose``."""
    state_rows = [r for r in parse_table(state_text) if r.get("GROUP") == group_id]
    if not state_rows:
        raise ValueError(f"no state row for group {group_id!r} in the tool output")
    st = state_rows[0]
    members, topology_epoch = [], None
    for row in parse_table(members_text):
        if row.get("GROUP") != group_id:
            continue
        topology_epoch = _int(row.get("TOPOLOGY-EPOCH"))
        current, target = parse_streams_assignments(row.get("ASSIGNMENTS", ""))
        protocol = row.get("MEMBER-PROTOCOL", "streams")
        members.append(StreamsGroupMember(
            member_id=row["MEMBER"],
            process_id=row.get("PROCESS", ""),
            client_id=row.get("CLIENT-ID", ""),
            member_epoch=_int(row.get("MEMBER-EPOCH")),
            protocol=MemberProtocol.CLASSIC if protocol == "classic" else MemberProtocol.STREAMS,
            assignment=current,
            target_assignment=target,
        ))
    coordinator = re.search(r"\((\d+)\)", st.get("COORDINATOR (ID)", ""))
    return StreamsGroupDescription(
        group_id=group_id,
        state=normalize_state(st.get("STATE")),
        coordinator_id=int(coordinator.group(1)) if coordinator else None,
        group_epoch=_int(st.get("GROUP-EPOCH")),
        target_assignment_epoch=_int(st.get("TARGET-ASSIGNMENT-EPOCH")),
        topology_epoch=topology_epoch,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
    )
