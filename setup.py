"""What pyproject.toml cannot say (everything else is there).

* The wheel carries the documentation (``docs/``) in the package (``airflow_provider_kip848/_docs``), so every
  Airflow API server the provider is installed in serves it (``airflow_provider_kip848.plugins.docs``).
* The Homepage and Documentation project URLs are that served documentation, relative to the Airflow UI
  (Airflow's Providers page links the package name to the ``Documentation`` URL): the package has no public
  home yet, and pyproject.toml's ``[project.urls]`` accepts only absolute URLs. A link relative to the UI opens
  in every deployment; an absolute one to a site that does not exist opens nowhere.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: relative to the Airflow UI's base URL (the Providers page is <base>/providers): the docs plugin's mount point
DOCS_URL = "kip848-docs/index.md"


class build_py_with_docs(build_py):
    """The package as usual, and ``docs/`` copied into it as ``_docs`` (Markdown pages and their images)."""

    def run(self) -> None:
        super().run()
        source = HERE / "docs"
        if source.is_dir():
            target = Path(self.build_lib) / "airflow_provider_kip848" / "_docs"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.py", "__pycache__", ".*"))


setup(
    cmdclass={"build_py": build_py_with_docs},
    project_urls={"Homepage": DOCS_URL, "Documentation": DOCS_URL},
)
