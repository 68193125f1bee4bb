"""Ravi's contracts: the layer every other Ravi package depends on.

The kernel holds no behaviour beyond value types, validation and the backend registry. Import from the
submodules (``ravi.kernel.messages``, ``ravi.kernel.storage``, ...); the most used names are re-exported here.

Importing it sets the level of Ravi's loggers from ``RAVI_LOG`` (``debug``, ``info``, ...), when it is set.
"""

from ravi.kernel._logs import apply_log_level as _apply_log_level
from ravi.kernel.agent import AgentContextProtocol, CompactionStrategy, HistoryRetention
from ravi.kernel.cancel import CancelledByToken, CancelToken
from ravi.kernel.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidArgument,
    InvalidMessage,
    InvalidTransition,
    NotFound,
    RaviError,
)
from ravi.kernel.messages import (
    ChatMessage,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)

_apply_log_level()

__all__ = [
    "AgentContextProtocol",
    "BackendUnavailable",
    "CancelToken",
    "CancelledByToken",
    "ChatMessage",
    "CompactionStrategy",
    "ConfigurationError",
    "ContentBlock",
    "DocumentBlock",
    "HistoryRetention",
    "ImageBlock",
    "InvalidArgument",
    "InvalidMessage",
    "InvalidTransition",
    "NotFound",
    "RaviError",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
]
