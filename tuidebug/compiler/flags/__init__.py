"""Registry of every ``torch._inductor.config`` flag, read from source without importing torch.

``import torch._inductor`` costs seconds, so the viewer never does it: the installed torch is found
with ``importlib.util.find_spec`` and ``_inductor/config.py`` is parsed with ``ast``, following the
rules of ``torch.utils._config_module.install_config_module`` (public module-level values,
``Config(...)`` entries, nested classes, ``@inherit_fields_from``).

Defaults are computed only for literals and simple expressions of them. The build is taken to be
OSS (``is_fbcode()`` is False) and the registry never reads the environment: a default that reads
an environment variable has ``default=None``, its source in ``default_repr`` and the names in
``env``. :func:`values_in_force` evaluates those defaults with an environment (this process's by
default), still without running config.py: only reads of the environment (``os.environ.get``,
``os.getenv``, ``os.environ[...]``, ``in os.environ``, ``get_tristate_env``), ``int``/``float``/
``str``/``bool``, a few ``str`` methods and config.py's own helper functions made of ``if``,
``return`` and assignments are evaluated; anything else stays unknown.

Modules: ``evaluator`` (the restricted expression evaluator), ``config_parser`` (config.py's
statements → flags), ``values`` (:class:`Flag`, its type, command-line values), ``registry``
(:class:`Registry`, :func:`load_registry`, :func:`values_in_force`). The table that
``tuidebug flags`` prints is drawn by :mod:`tuidebug.viewers.flags_table`.
"""

from __future__ import annotations

from tuidebug.compiler.flags.registry import (InForce, Registry, default_config_path, flag_json,
                                              load_registry, values_in_force)
from tuidebug.compiler.flags.values import Flag, TypeSpec
from tuidebug.errors import FlagValueError, UnknownFlag

__all__ = ["Flag", "FlagValueError", "InForce", "Registry", "TypeSpec", "UnknownFlag",
           "default_config_path", "flag_json", "load_registry", "values_in_force"]
