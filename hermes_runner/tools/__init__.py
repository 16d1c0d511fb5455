"""Tools and toolsets; `registry` holds the single list of valid tool names."""

from hermes_runner.tools.registry import Tool, ToolContext, ToolResult, all_tools, tool_names, tools_for, toolset_names

__all__ = ["Tool", "ToolContext", "ToolResult", "all_tools", "tool_names", "toolset_names", "tools_for"]
