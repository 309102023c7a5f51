"""The whole ``dpgauss`` command line: one module per sub-command, thin over the library.

* :mod:`.app` — the parser, :func:`main` (the console script ``dpgauss``) and the one-line
  error contract: bad arguments and library errors end in ``dpgauss: error: ...`` on stderr
  and exit status 2, never a traceback; Ctrl-C is 130, a closed pipe 141;
* :mod:`.calibrate` — ``calibrate`` and ``profile`` (the analytic Gaussian mechanism);
* :mod:`.demo` — ``demo``;
* :mod:`.release` — ``release SPEC`` (plan, charge, write: :mod:`dpgauss.release.pipeline`);
* :mod:`.check` — ``check SPEC``, the data owner's confidential check;
* :mod:`.budget` — ``budget init|show|list|plan`` over the ledger;
* :mod:`.denoise` — ``denoise TABLE``, post-processing of a published table;
* :mod:`.reproduce` — ``reproduce [FIGURE ...]``, the paper's figures;
* :mod:`._args` — argument types shared by the sub-commands.

``python -m dpgauss.cli`` runs :func:`main` too.
"""

from __future__ import annotations

from .app import main

__all__ = ["main"]
