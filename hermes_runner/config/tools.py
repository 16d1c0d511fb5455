"""The tools section (the backends and endpoints the toolsets use) and the distribution of toolsets."""

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from omegaconf import MISSING


@dataclass
class DistributionConfig:
    name: str = MISSING
    description: str = ""
    toolsets: dict[str, float] = field(default_factory=dict)  # toolset -> probability in %


class UnavailablePolicy(str, Enum):
    """What to do with a toolset whose backend is not configured."""

    drop = "drop"  # leave it out of every prompt, with a warning at start
    refuse = "refuse"  # do not start the run


@dataclass
class EndpointConfig:
    """An OpenAI-compatible endpoint a tool calls (vision, image generation, MoA)."""

    model: str | None = None  # model id; null = not configured
    base_url: str | None = None  # null: the run's own model endpoint (model.base_url and its key)
    api_key_env: str | None = None  # name of the env var holding the key (used with base_url)
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 3
    extra_body: dict[str, Any] = field(default_factory=dict)
    RULES = {"timeout_s": "> 0", "max_retries": ">= 0", "max_tokens": ">= 1"}


@dataclass
class FetchConfig:
    """HTTP downloads made by tools (web_extract, image URLs)."""

    timeout_s: float = 20.0  # whole download, redirects included
    max_bytes: int = 10_000_000  # larger bodies are cut (a cut PDF is an error)
    max_redirects: int = 5
    user_agent: str = "Mozilla/5.0 (compatible; hermes-runner/0.1)"
    RULES = {"timeout_s": "> 0", "max_bytes": ">= 1", "max_redirects": ">= 0"}


@dataclass
class SearxngConfig:
    url: str | None = None  # base URL of a SearXNG instance with the JSON format enabled
    categories: str | None = None  # e.g. "general,news"
    language: str | None = None  # e.g. "en"
    safesearch: int | None = None  # 0, 1 or 2


@dataclass
class TavilyConfig:
    base_url: str = "https://api.tavily.com"
    api_key_env: str = "TAVILY_API_KEY"  # name of the env var holding the key
    search_depth: str = "basic"  # basic | advanced


class SearchKind(StrEnum):
    """Web search backends (tools/backends/search/: one module each)."""

    searxng = "searxng"  # a SearXNG instance's JSON API (tools.web.searxng.url)
    tavily = "tavily"  # the Tavily API (key in the environment)


@dataclass
class WebConfig:
    search_backend: str | None = None  # searxng | tavily | a class of yours (package.module:Class) | null (no web)
    searxng: SearxngConfig = field(default_factory=SearxngConfig)
    tavily: TavilyConfig = field(default_factory=TavilyConfig)
    search_timeout_s: float = 20.0
    max_urls: int = 5  # URLs per web_extract call
    char_limit: int = 15_000  # default characters per page (head/tail view beyond)
    max_char_limit: int = 50_000  # the most a call may ask for per page
    call_char_budget: int = 90_000  # characters of all pages of one call together
    RULES = {"search_backend": SearchKind, "search_timeout_s": "> 0", "max_urls": ">= 1", "char_limit": ">= 1",
             "max_char_limit": ">= 1", "call_char_budget": ">= 1"}  # fmt: skip


@dataclass
class CodeExecutionConfig:
    python: str = "python3"  # interpreter inside the sandbox
    timeout_s: float = 60.0  # default per call
    max_timeout_s: float = 300.0  # the most a call may ask for
    max_stderr_chars: int = 10_000
    max_result_chars: int = 10_000
    RULES = {"timeout_s": "> 0", "max_timeout_s": "> 0", "max_stderr_chars": ">= 0", "max_result_chars": ">= 0"}


@dataclass
class VisionConfig:
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    max_image_bytes: int = 20_000_000
    RULES = {"max_image_bytes": ">= 1"}


@dataclass
class ImageGenConfig:
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    sizes: dict[str, str] = field(
        default_factory=lambda: {"landscape": "1536x1024", "square": "1024x1024", "portrait": "1024x1536"}
    )
    response_format: str | None = "b64_json"  # b64_json | url | null (endpoint default)
    quality: str | None = None
    output_dir: str = "generated_images"  # inside the task's working directory


@dataclass
class MoaConfig:
    reference_models: list[EndpointConfig] = field(default_factory=list)  # asked in parallel
    aggregator: EndpointConfig = field(default_factory=EndpointConfig)  # combines their answers
    min_successful: int = 1  # reference answers needed to aggregate
    RULES = {"min_successful": ">= 1"}


@dataclass
class BrowserConfig:
    executable: str | None = None  # Chromium binary; null: chromium / chromium-browser / google-chrome on PATH
    headless: bool = True
    args: list[str] = field(default_factory=list)  # extra Chromium flags
    viewport_width: int = 1280
    viewport_height: int = 800
    navigation_timeout_s: float = 30.0
    action_timeout_s: float = 10.0
    snapshot_max_chars: int = 8_000  # compact snapshot (browser_snapshot full=false)
    full_snapshot_max_chars: int = 40_000
    RULES = {"viewport_width": ">= 1", "viewport_height": ">= 1", "navigation_timeout_s": "> 0",
             "action_timeout_s": "> 0", "snapshot_max_chars": ">= 1", "full_snapshot_max_chars": ">= 1"}  # fmt: skip


@dataclass
class ToolsConfig:
    unavailable: UnavailablePolicy = UnavailablePolicy.drop
    allow_private_urls: bool = False  # let tools reach loopback/private addresses (local test sites)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    web: WebConfig = field(default_factory=WebConfig)
    code_execution: CodeExecutionConfig = field(default_factory=CodeExecutionConfig)
    vision: VisionConfig = field(default_factory=VisionConfig)
    image_gen: ImageGenConfig = field(default_factory=ImageGenConfig)
    moa: MoaConfig = field(default_factory=MoaConfig)
    browser: BrowserConfig = field(default_factory=BrowserConfig)
