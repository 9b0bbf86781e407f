"""The package list, found from the folders (pyproject.toml holds everything else).

The passes live at the top of the repository and install beneath ``tensorlang``: each folder of
``ROOTS`` is the package on its left, and every folder under it that has an ``__init__.py`` is found
and installed as its subpackage, so a new subpackage (``derive/ad/rules``) can never be left out of a
wheel.  ``docs/`` is not a Python package; it ships the reference pages as ``tensorlang/docs/*.md``.
"""
from setuptools import find_packages, setup

ROOTS = {
    "tensorlang": "tensorlang",
    "tensorlang.normalize": "normalize",
    "tensorlang.derive": "derive",
    "tensorlang.codegen": "codegen",
    "tensorlang.examples": "examples",
}
DATA = {"tensorlang.docs": "docs"}


def packages() -> list[str]:
    found = []
    for package, folder in ROOTS.items():
        found += [package, *(f"{package}.{sub}" for sub in find_packages(folder))]
    return found + list(DATA)


setup(packages=packages(), package_dir={**ROOTS, **DATA})
