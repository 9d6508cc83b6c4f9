"""Chat building blocks every chat surface shares: messages, the chat template, tool calling
and the parsing of a chat answer into reasoning, text and tool calls."""
