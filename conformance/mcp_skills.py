"""The fixtures of the official MCP conformance suite's server scenarios (see `run-mcp-sut`).

npm `@modelcontextprotocol/conformance` 0.2.0-alpha.12 (package.json) names, in each server
scenario's description, the tools, resources and prompts a server under test must have
(`test_simple_text`, `test://static-text`, `test_simple_prompt`, ...). They join the product's
own skills and documents here:

- the tools are skills, registered in the product's registry beside its own skills and
  called through the product's MCP adapter like any of them: their results, progress, log
  lines, errors, attachments (`ctx.attach`), questions (`ctx.ask`) and requests to the
  client's model (`ctx.client_model`) travel as the product's skills' do, so a scenario
  that fails shows what the adapter cannot carry yet;
- the resources and prompts are the suite's own (the adapter offers documents and one prompt,
  and has no registry of either): `FixtureResources` and `FixturePrompts` answer for the
  suite's URIs and names and hand everything else to the product's handlers.

Tools the skill API cannot express are left out (roots, several input requests in one result,
a required client capability); their scenarios fail with "unknown tool" (README-mcp.md).
"""

import asyncio
import base64
import json
from typing import Any, Literal

import mcp.types as types
from mcp.server import Server
from mcp.server.lowlevel.server import HandlerEntry
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.routing import Mount

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.skills import FileResult, SkillContext, SkillError, SkillRegistry

# A 1x1 red pixel PNG and a 1-sample silent WAV: the smallest files of their kinds.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==")

STEP_SECONDS = 0.05  # the suite's "~50ms" between a tool's notifications

TEXT_RESOURCE = "test://static-text"
BINARY_RESOURCE = "test://static-binary"
WATCHED_RESOURCE = "test://watched-resource"
FIXTURE_URIS = frozenset({TEXT_RESOURCE, BINARY_RESOURCE, WATCHED_RESOURCE})
TEMPLATE = "test://template/{id}/data"
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"


class NoArguments(BaseModel):
    pass


class Reply(BaseModel):
    text: str


def _text(output: Reply) -> str:
    return output.text


# An empty string is an argument not given: a form field must have one primitive type.


class ElicitationInput(BaseModel):
    message: str = Field(description="The message to show the user")
    username: str = Field(default="", description="User's response")
    email: str = Field(default="", description="User's email address")


class DefaultsInput(BaseModel):
    """SEP-1034: the question offers a default for every primitive type."""

    # The schema's default is what the form offers; "" says the question is still to ask.
    name: str = Field(default="", json_schema_extra={"default": "John Doe"})
    age: int = 30
    score: float = 95.5
    status: Literal["active", "inactive", "pending"] = "active"
    verified: bool = True


def _titled(*choices: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in choices]


class EnumsInput(BaseModel):
    """SEP-1330: the five kinds of choice a form may offer (None: not chosen yet)."""

    untitled_single: Literal["option1", "option2", "option3"] | None = Field(
        default=None, alias="untitledSingle", title="Untitled single choice"
    )
    titled_single: str | None = Field(
        default=None,
        alias="titledSingle",
        title="Titled single choice",
        json_schema_extra={
            "oneOf": _titled(("value1", "First Option"), ("value2", "Second Option"))
        },
    )
    legacy_enum: str | None = Field(
        default=None,
        alias="legacyEnum",
        title="Legacy titled choice",
        json_schema_extra={
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
    )
    untitled_multi: list[Literal["option1", "option2", "option3"]] | None = Field(
        default=None, alias="untitledMulti", title="Untitled choices"
    )
    titled_multi: list[str] | None = Field(
        default=None,
        alias="titledMulti",
        title="Titled choices",
        json_schema_extra={
            "items": {"anyOf": _titled(("value1", "First Choice"), ("value2", "Second Choice"))}
        },
    )


class NameInput(BaseModel):
    name: str = Field(default="", description="Your name")


class ConfirmInput(BaseModel):
    ok: bool = Field(default=False, description="Confirmed")


class PromptInput(BaseModel):
    prompt: str = Field(description="The prompt to send to the LLM")


class TwoStepsInput(BaseModel):
    name: str = Field(default="", description="Your name")
    color: str = Field(default="", description="Your favorite color")


def add_fixture_skills(registry: SkillRegistry) -> None:
    """The suite's tools, as skills of `registry`."""

    def skill(description: str, name: str | None = None):  # type: ignore[no-untyped-def]
        return registry.skill(
            description=description, name=name, tags=["mcp-conformance"], render=_text
        )

    @skill("Returns a simple text (tools-call-simple-text).")
    async def test_simple_text(ctx: SkillContext, args: NoArguments) -> Reply:
        return Reply(text="This is a simple text response for testing.")

    @skill("Returns a PNG image (tools-call-image).")
    async def test_image_content(ctx: SkillContext, args: NoArguments) -> Reply:
        await ctx.attach(FileResult(name="red-pixel.png", media_type="image/png", content=PNG))
        return Reply(text="An image: a red pixel.")

    @skill("Returns a WAV sound (tools-call-audio).")
    async def test_audio_content(ctx: SkillContext, args: NoArguments) -> Reply:
        await ctx.attach(FileResult(name="silence.wav", media_type="audio/wav", content=WAV))
        return Reply(text="A sound: silence.")

    @skill("Returns an embedded text resource (tools-call-embedded-resource).")
    async def test_embedded_resource(ctx: SkillContext, args: NoArguments) -> Reply:
        resource = FileResult(
            name="test://embedded-resource",
            media_type="text/plain",
            content=b"This is an embedded resource content.",
        )
        await ctx.attach(resource)
        return Reply(text="An embedded resource.")

    @skill("Returns text, an image and a resource (tools-call-mixed-content).")
    async def test_multiple_content_types(ctx: SkillContext, args: NoArguments) -> Reply:
        data = json.dumps({"test": "data", "value": 123}).encode()
        await ctx.attach(
            FileResult(name="red-pixel.png", media_type="image/png", content=PNG),
            FileResult(
                name="test://mixed-content-resource", media_type="application/json", content=data
            ),
        )
        return Reply(text="Multiple content types test:")

    @skill("Logs three lines at info level, 50 ms apart (tools-call-with-logging).")
    async def test_tool_with_logging(ctx: SkillContext, args: NoArguments) -> Reply:
        for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.progress(line)  # a progress step is an info line of the client's log
            await asyncio.sleep(STEP_SECONDS)
        return Reply(text="Tool with logging executed successfully")

    @skill("Reports progress three times, 50 ms apart (tools-call-with-progress).")
    async def test_tool_with_progress(ctx: SkillContext, args: NoArguments) -> Reply:
        for done in (0, 50, 100):
            await ctx.progress(f"{done}/100")
            await asyncio.sleep(STEP_SECONDS)
        return Reply(text="Tool with progress executed successfully")

    @skill("Always fails (tools-call-error).")
    async def test_error_handling(ctx: SkillContext, args: NoArguments) -> Reply:
        raise SkillError("This tool intentionally returns an error for testing")

    @skill("Asks the user for a username and an email (tools-call-elicitation).")
    async def test_elicitation(ctx: SkillContext, args: ElicitationInput) -> Reply:
        if not args.username or not args.email:
            ctx.ask(args.message, ["username", "email"])
        content = {"username": args.username, "email": args.email}
        return Reply(text=f"User response: action=accept, content={json.dumps(content)}")

    @skill("Asks a question whose fields have defaults (elicitation-sep1034-defaults).")
    async def test_elicitation_sep1034_defaults(ctx: SkillContext, args: DefaultsInput) -> Reply:
        if not args.name:
            ctx.ask(
                "Please review and update the form fields with defaults",
                ["name", "age", "score", "status", "verified"],
            )
        content = args.model_dump()
        return Reply(text=f"Elicitation completed: action=accept, content={json.dumps(content)}")

    @skill("Asks the user to choose from the five kinds of choice (elicitation-sep1330-enums).")
    async def test_elicitation_sep1330_enums(ctx: SkillContext, args: EnumsInput) -> Reply:
        chosen = args.model_dump(by_alias=True)
        unchosen = [name for name, value in chosen.items() if value is None]
        if unchosen:
            ctx.ask("Please select options from the enum fields", unchosen)
        return Reply(text=f"Elicitation completed: action=accept, content={json.dumps(chosen)}")

    async def sample(ctx: SkillContext, prompt: str) -> Reply:
        model = ctx.client_model
        if model is None:
            raise SkillError("the client offers no model to ask (no sampling)")
        reply = await model.complete([{"role": "user", "content": prompt}], max_tokens=100)
        return Reply(text=f"LLM response: {reply}")

    @skill("Asks the client's model the prompt given (tools-call-sampling).")
    async def test_sampling(ctx: SkillContext, args: PromptInput) -> Reply:
        return await sample(ctx, args.prompt)

    @skill("Asks the client's model a question (input-required-result-basic-sampling).")
    async def test_input_required_result_sampling(ctx: SkillContext, args: NoArguments) -> Reply:
        return await sample(ctx, "What is the capital of France?")

    @skill("Asks the client's model if it offers one, else the user (capability-check).")
    async def test_input_required_result_capabilities(ctx: SkillContext, args: NameInput) -> Reply:
        # As the product's skills do: the client's model when the client offers it.
        if ctx.client_model is not None:
            return await sample(ctx, "Suggest a name for a test user")
        if not args.name:
            ctx.ask("What is your name?", ["name"])
        return Reply(text=f"Hello, {args.name}!")

    @skill("Asks for a name, then greets (input-required-result-basic-elicitation).")
    async def test_input_required_result_elicitation(ctx: SkillContext, args: NameInput) -> Reply:
        if not args.name:
            ctx.ask("What is your name?", ["name"], name="user_name")
        return Reply(text=f"Hello, {args.name}!")

    async def confirm(ctx: SkillContext, args: ConfirmInput) -> Reply:
        # Answered only through a requestState the adapter accepted as its own.
        if not args.ok:
            ctx.ask("Please confirm", ["ok"])
        return Reply(text="state-ok: the confirmation came back with a valid requestState")

    for state in ("request_state", "tampered_state"):
        scenario = f"input-required-result-{state.replace('_', '-')}"
        skill(f"Asks for a confirmation ({scenario}).", f"test_input_required_result_{state}")(
            confirm
        )

    @skill("Asks for a name, then a color (input-required-result-multi-round).")
    async def test_input_required_result_multi_round(
        ctx: SkillContext, args: TwoStepsInput
    ) -> Reply:
        if not args.name:
            ctx.ask("Step 1: What is your name?", ["name"])
        if not args.color:
            ctx.ask("Step 2: What is your favorite color?", ["color"])
        return Reply(text=f"{args.name} likes {args.color}")

    @skill("Asks the user a question (server-stateless: no requests on the response stream).")
    async def test_streaming_elicitation(ctx: SkillContext, args: NameInput) -> Reply:
        if not args.name:
            ctx.ask("What is your name?", ["name"])
        return Reply(text=f"Hello, {args.name}!")

    @skill("Logs while it runs (server-stateless: no log lines unless _meta asks for them).")
    async def test_logging_tool(ctx: SkillContext, args: NoArguments) -> Reply:
        await ctx.progress("a log line at info level")
        return Reply(text="logged")


class FixtureResources:
    """`resources/*` for the suite's URIs; the product's handlers answer everything else."""

    def __init__(self, server: Server[Any]) -> None:
        self._product = {
            method: _entry(server, method)
            for method in ("resources/list", "resources/templates/list", "resources/read")
        }
        self.subscribed: set[str] = set()

    def install(self, server: Server[Any]) -> None:
        server.add_request_handler(
            "resources/list", types.PaginatedRequestParams, self.list_resources
        )
        # Served where the product offers subscriptions (HTTP sessions: one worker).
        for method, params in (
            ("resources/subscribe", types.SubscribeRequestParams),
            ("resources/unsubscribe", types.UnsubscribeRequestParams),
        ):
            product = server.get_request_handler(method)
            if product is not None:
                server.add_request_handler(method, params, self._subscription(product))
        server.add_request_handler(
            "resources/templates/list", types.PaginatedRequestParams, self.list_templates
        )
        server.add_request_handler("resources/read", types.ReadResourceRequestParams, self.read)

    def _subscription(self, product: HandlerEntry[Any]) -> Any:
        """The product's (un)subscribe handler, which first records the suite's own URIs:
        their content never changes, so there is nothing to notify."""

        async def handle(
            ctx: Any, params: types.SubscribeRequestParams | types.UnsubscribeRequestParams
        ) -> types.EmptyResult:
            if params.uri not in FIXTURE_URIS:
                result: types.EmptyResult = await product.handler(ctx, params)
                return result
            if isinstance(params, types.SubscribeRequestParams):
                self.subscribed.add(params.uri)
            else:
                self.subscribed.discard(params.uri)
            return types.EmptyResult()

        return handle

    async def list_resources(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        product: types.ListResourcesResult = await self._product["resources/list"].handler(
            ctx, params
        )
        if params is not None and params.cursor is not None:
            return product  # a later page of the product's documents
        fixtures = [
            types.Resource(
                uri=TEXT_RESOURCE,
                name="static-text",
                description="A static text resource for testing",
                mime_type="text/plain",
            ),
            types.Resource(
                uri=BINARY_RESOURCE,
                name="static-binary",
                description="A static binary resource (a PNG) for testing",
                mime_type="image/png",
            ),
            types.Resource(
                uri=WATCHED_RESOURCE,
                name="watched-resource",
                description="A resource to subscribe to",
                mime_type="text/plain",
            ),
        ]
        return product.model_copy(update={"resources": [*fixtures, *product.resources]})

    async def list_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        product: types.ListResourceTemplatesResult = await self._product[
            "resources/templates/list"
        ].handler(ctx, params)
        fixture = types.ResourceTemplate(
            uri_template=TEMPLATE,
            name="template",
            description="A resource template with an id",
            mime_type="application/json",
        )
        templates = [fixture, *product.resource_templates]
        return product.model_copy(update={"resource_templates": templates})

    async def read(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = params.uri
        if uri in (TEXT_RESOURCE, WATCHED_RESOURCE):
            text = "This is the content of the static text resource."
            contents: list[types.TextResourceContents | types.BlobResourceContents] = [
                types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)
            ]
        elif uri == BINARY_RESOURCE:
            blob = base64.b64encode(PNG).decode()
            contents = [types.BlobResourceContents(uri=uri, mime_type="image/png", blob=blob)]
        elif uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
            id_ = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
            data = {"id": id_, "templateTest": True, "data": f"Data for ID: {id_}"}
            contents = [
                types.TextResourceContents(
                    uri=uri, mime_type="application/json", text=json.dumps(data)
                )
            ]
        else:
            product: types.ReadResourceResult = await self._product["resources/read"].handler(
                ctx, params
            )
            return product
        return types.ReadResourceResult(contents=contents)


class FixturePrompts:
    """`prompts/*` and prompt completion for the suite's prompts, beside the product's."""

    def __init__(self, server: Server[Any]) -> None:
        self._product = {
            method: _entry(server, method)
            for method in ("prompts/list", "prompts/get", "completion/complete")
        }

    def install(self, server: Server[Any]) -> None:
        server.add_request_handler("prompts/list", types.PaginatedRequestParams, self.list_prompts)
        server.add_request_handler("prompts/get", types.GetPromptRequestParams, self.get_prompt)
        server.add_request_handler(
            "completion/complete", types.CompleteRequestParams, self.complete
        )

    PROMPTS = (
        types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
        types.Prompt(
            name="test_prompt_with_arguments",
            description="A prompt with two required arguments",
            arguments=[
                types.PromptArgument(name="arg1", description="First test argument", required=True),
                types.PromptArgument(
                    name="arg2", description="Second test argument", required=True
                ),
            ],
        ),
        types.Prompt(
            name="test_prompt_with_embedded_resource",
            description="A prompt that embeds a resource",
            arguments=[
                types.PromptArgument(
                    name="resourceUri", description="URI of the resource to embed", required=True
                )
            ],
        ),
        types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
        types.Prompt(
            name="test_input_required_result_prompt",
            description="A prompt that asks the client for its context first (2026-07-28)",
        ),
    )

    async def list_prompts(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        product: types.ListPromptsResult = await self._product["prompts/list"].handler(ctx, params)
        return product.model_copy(update={"prompts": [*self.PROMPTS, *product.prompts]})

    async def get_prompt(
        self, ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        arguments = params.arguments or {}

        def user(content: types.ContentBlock) -> types.PromptMessage:
            return types.PromptMessage(role="user", content=content)

        def text(value: str) -> types.TextContent:
            return types.TextContent(type="text", text=value)

        match params.name:
            case "test_simple_prompt":
                messages = [user(text("This is a simple prompt for testing."))]
            case "test_prompt_with_arguments":
                arg1, arg2 = _required(arguments, "arg1"), _required(arguments, "arg2")
                messages = [user(text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]
            case "test_prompt_with_embedded_resource":
                uri = _required(arguments, "resourceUri")
                resource = types.TextResourceContents(
                    uri=uri, mime_type="text/plain", text="Embedded resource content for testing."
                )
                messages = [
                    user(types.EmbeddedResource(type="resource", resource=resource)),
                    user(text("Please process the embedded resource above.")),
                ]
            case "test_prompt_with_image":
                image = types.ImageContent(
                    type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"
                )
                messages = [user(image), user(text("Please analyze the image above."))]
            case "test_input_required_result_prompt":
                context = _context_answer(params.input_responses or {})
                if context is None:
                    return CONTEXT_QUESTION
                messages = [user(text(f"Answer within this context: {context}"))]
            case _:
                product: types.GetPromptResult = await self._product["prompts/get"].handler(
                    ctx, params
                )
                return product
        return types.GetPromptResult(messages=messages)

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference) and ref.name == "test_prompt_with_arguments":
            typed = params.argument.value
            values = [v for v in ("paris", "park", "party") if v.startswith(typed)]
            return types.CompleteResult(completion=types.Completion(values=values, has_more=False))
        product: types.CompleteResult = await self._product["completion/complete"].handler(
            ctx, params
        )
        return product


CONTEXT_QUESTION = types.InputRequiredResult(
    input_requests={
        "user_context": types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message="What context should the prompt use?",
                requested_schema={
                    "type": "object",
                    "properties": {"context": {"type": "string"}},
                    "required": ["context"],
                },
            )
        )
    }
)


def _context_answer(responses: dict[str, Any]) -> str | None:
    answer = responses.get("user_context")
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
        return None
    context = (answer.content or {}).get("context")
    return context if isinstance(context, str) and context else None


def _required(arguments: dict[str, str], name: str) -> str:
    value = arguments.get(name)
    if value is None:
        raise MCPError(types.INVALID_PARAMS, f"missing required argument {name!r}")
    return value


def _entry(server: Server[Any], method: str) -> HandlerEntry[Any]:
    entry = server.get_request_handler(method)
    if entry is None:
        raise RuntimeError(f"the product's MCP server has no {method} handler")
    return entry


def mcp_server_of(app: Starlette) -> Server[Any]:
    """The MCP server behind the app's `/mcp` (mcp/http.py: the last mount, one route)."""
    mount = app.routes[-1]
    assert isinstance(mount, Mount), "the MCP app is the app's last route"
    endpoint = mount.routes[0].endpoint  # type: ignore[attr-defined]
    server: Server[Any] = endpoint._sse.app  # both session managers serve this one server
    return server


def sut_app() -> Starlette:
    """The product's app with the suite's fixtures: what run-mcp-sut serves."""
    app = build_app(Settings())
    add_fixture_skills(app.state.engine.registry)
    server = mcp_server_of(app)
    FixtureResources(server).install(server)
    FixturePrompts(server).install(server)
    return app
