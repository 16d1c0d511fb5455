"""Tools and toolsets: `base` (what a tool is), one module per toolset, `catalog` (the single list of valid tool
names); `backends/` the services they need. It may import model/, sandbox/ and vocabulary."""

from hermes_runner.tools.base import Tool, ToolContext, ToolResult
from hermes_runner.tools.catalog import all_tools, tool_names, tools_for, toolset_names

__all__ = ["Tool", "ToolContext", "ToolResult", "all_tools", "tool_names", "toolset_names", "tools_for"]
