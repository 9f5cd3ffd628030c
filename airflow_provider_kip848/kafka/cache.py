"""Where the provider keeps what it downloads: the Kafka jars of the CLI tools, the Spark Kafka connector.

``$KIP848_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-provider-kip848``
(``~/.cache/...``). The Makefile points it at ``.cache/`` inside the checkout
(git-ignored). An air-gapped worker pre-fills it (see docs/deploy.md).
"""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$KIP848_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-provider-kip848``."""
    env = os.environ.get("KIP848_CACHE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "airflow-provider-kip848"
