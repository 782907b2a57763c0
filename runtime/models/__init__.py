"""Neta's runtime records, one module per resource; every name is importable from here.

- ``registry``: models (``ModelConfig``) and agents, and the rules a model's key and an
  agent's fallbacks follow;
- ``runs``: runs and the prompts sent while they run;
- ``access``: API tokens and users' own settings;
- ``processes``: subagent children, their events, the background duties' beats;
- ``conversations``: Chat Completions conversation nodes, share links, pins;
- ``traces``: model calls, tool calls and the texts their requests share.

Inside the package the modules point downwards (``processes | traces`` > ``runs`` >
``registry | access | conversations``); the contracts in pyproject.toml hold it."""

from runtime.models.access import (
    ApiToken,
    TokenScope,
    UserSettings,
)
from runtime.models.conversations import (
    ConversationNode,
    SessionPin,
    SessionShare,
)
from runtime.models.processes import (
    ACTIVE_SUBPROCESS_STATUSES,
    ProcessBeat,
    SubagentApproval,
    SubagentApprovalStatus,
    SubprocessEvent,
    SubprocessRun,
    SubprocessStatus,
)
from runtime.models.registry import (
    CREDENTIAL_FIELDS,
    DIRECT_KEYS_CODENAME,
    DIRECT_KEYS_PERMISSION,
    ENV_NAME,
    MAX_WORKSPACE_BYTES,
    SLUG,
    THINKING_LEVELS,
    Agent,
    LlmProviderKind,
    ModelConfig,
    SummarizeOnSwitch,
    WorkspaceMode,
    fallback_model_errors,
    model_key_names,
    rules_dirs,
    tools_handed,
)
from runtime.models.runs import (
    ACTIVE_RUN_STATUSES,
    AgentRun,
    RunInput,
    RunInputKind,
    RunStatus,
)
from runtime.models.traces import (
    Blob,
    ModelCall,
    ToolCallRecord,
)

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "ACTIVE_SUBPROCESS_STATUSES",
    "Agent",
    "AgentRun",
    "ApiToken",
    "Blob",
    "ConversationNode",
    "CREDENTIAL_FIELDS",
    "DIRECT_KEYS_CODENAME",
    "DIRECT_KEYS_PERMISSION",
    "ENV_NAME",
    "fallback_model_errors",
    "LlmProviderKind",
    "MAX_WORKSPACE_BYTES",
    "model_key_names",
    "ModelCall",
    "ModelConfig",
    "ProcessBeat",
    "rules_dirs",
    "RunInput",
    "RunInputKind",
    "RunStatus",
    "SessionPin",
    "SessionShare",
    "SLUG",
    "SubagentApproval",
    "SubagentApprovalStatus",
    "SubprocessEvent",
    "SubprocessRun",
    "SubprocessStatus",
    "SummarizeOnSwitch",
    "THINKING_LEVELS",
    "TokenScope",
    "ToolCallRecord",
    "tools_handed",
    "UserSettings",
    "WorkspaceMode",
]
