"""The one governed run loop, private; ``Agent`` (and delegation) are façades over it.

A run reads an explicit :class:`~deputy_shiny._engine.deps.RunDeps` (what it may use)
and changes a :class:`~deputy_shiny.conversation.Conversation` (what it has done); it
never reads an Agent's private state. The map, in the order a run meets it:

* ``options``: the run keywords (RunKeywords, declared once) and one run's checked
  arguments (task, limits, structured output type);
* ``deps``: RunDeps, everything one run may use (frozen), and RunReport;
* ``budget``: what runs spend: the one usage accumulator (UsageTally), the one charge
  rule (response_usage), a run's Meter, and SharedBudget, the limits a run shares
  with its delegations;
* ``loop``: the Engine: the run's steps, limits, stop reasons;
* ``request``: one model request: retries, fallbacks, streaming, the response's turn;
* ``state``: what one run carries between steps, and error results;
* ``tool_calls``: a response's tool calls: the gate, execution, results;
* ``gate``: permission steps 7-9 per call (permission hooks, PreToolUse, approvals);
* ``notices``: ``warning`` events and the ``Notification`` hook (denials, limits);
* ``durable``: what the engine knows of durable approvals (pause and resume);
* ``journal``: the run journal's steps, and a run replayed after its process died;
* ``structured``: structured output prompts and the check of each reply;
* ``compaction``: token counts, the kept turns, summaries (ContextRuntime);
* ``offload``: large tool results kept aside, and ``read_tool_result``.

This ``__init__`` imports nothing, so importing one part loads only what it needs.
"""
