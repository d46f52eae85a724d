"""The op table (docs/architecture.md#the-op-table): :data:`OPS`, one :class:`Op` record
per kernel, and the names and dtype lists every layer reads from it."""
from .schema import DATA, SHAPE, VALUE, Attr, Input, Op  # noqa: F401
from .table import *  # noqa: F401,F403
from .table import OPS  # noqa: F401
