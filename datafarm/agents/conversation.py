"""One role's conversation with its model: the loop that calls the provider (with retries, within the
task's budget), runs the tools the model asks for, sends invalid artifacts back to the same role
with their validation errors (within a repair budget), and records every exchange in
`transcripts/<role>/NNNN.json` and in the ledger with its cost from K's price table.

A `RoleAgent` is one role (author, judge-writer or reviewer) in one task folder, with its own tools
and prompt; `run(RoleTask)` works one stage to completion, starting a fresh conversation, so no
stage's context (or any other role's) leaks into another.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, NoReturn

from datafarm.agents.budget import TaskBudget
from datafarm.agents.errors import BudgetExhausted, ProviderError, StageFailed
from datafarm.agents.messages import Message, ModelRequest, ModelResponse, ToolResult, Usage
from datafarm.agents.providers.base import Provider, ProviderSettings
from datafarm.agents.providers.function import estimate_request_tokens
from datafarm.agents.retry import RetryRecord, call_with_retries
from datafarm.agents.secrets import redact
from datafarm.agents.tools.base import Toolbox, ToolContext, WriteOutcome
from datafarm.agents.transcripts import TranscriptWriter, transcript_hash
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerCost, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.capability.models import PriceTable
from datafarm.errors import input_error
from datafarm.hashing import sha256_bytes
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir

log = logging.getLogger("datafarm.agents")

_LEDGER_ERROR_CHARS = 1500


@dataclass(frozen=True)
class RoleTask:
    """One stage's work for a role: what it must write, and how the conversation ends."""

    stage: Stage
    """The stage the work (and its cost) belongs to."""
    writes: tuple[str, ...]
    """What must be written validly for the stage to succeed (`grounding`, `contract`, `judge`, `review`...)."""
    instructions: str = ""
    """Extra words for the model, e.g. why the previous attempt was rejected by a checker."""
    finish: Literal["on_write", "on_reply"] = "on_write"
    """`on_write`: done as soon as everything in `writes` is written; `on_reply`: done when the model
    then answers without calling a tool (the expert stage, where rollouts follow the write)."""
    skill: str | None = None
    """K skill to put in the prompt (`skills/<skill>.md`); default the stage's name."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", Stage(self.stage))
        object.__setattr__(self, "writes", tuple(self.writes))
        if not self.writes:
            raise ValueError("a role task must write something")


@dataclass
class RoleResult:
    """What a stage's conversation produced and cost."""

    role: str
    """The role."""
    stage: Stage
    """The stage."""
    written: dict[str, WriteOutcome] = field(default_factory=dict)
    """Last valid write of each artifact."""
    transcripts: list[Path] = field(default_factory=list)
    """Transcript files of the exchanges, in order."""
    input_tokens: int = 0
    """Prompt tokens of all exchanges."""
    output_tokens: int = 0
    """Completion tokens of all exchanges."""
    usd: float = 0.0
    """Dollars of all exchanges."""
    final_text: str = ""
    """The model's last text answer."""

    def artifact(self, name: str) -> Artifact:
        """The validated artifact written as `name`."""
        value = self.written[name].value
        assert value is not None
        return value


@dataclass
class _Exchange:
    """One call of a conversation as it is recorded: what was sent, what came back, what the tools did."""

    task: RoleTask
    conversation: str
    turn: int
    system: str
    request: ModelRequest
    sent: list[Message]
    """Messages other than tool results added since the previous exchange (the transcript's `sent`)."""
    started: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    latency: float = 0.0
    retries: list[RetryRecord] = field(default_factory=list)
    response: ModelResponse | None = None
    results: list[ToolResult] = field(default_factory=list)
    writes: list[WriteOutcome] = field(default_factory=list)
    usd: float = 0.0
    crash: str | None = None
    """Why the exchange failed (the provider's error, or a crashed tool), if it did."""


PromptBuilder = Callable[[RoleTask], str]
"""`prompt(task) -> system prompt` for one stage."""


class RoleAgent:
    """One role of one task: its provider, tools, prompt, transcripts and share of the budget."""

    def __init__(
        self,
        role: str,
        provider: Provider,
        tools: Toolbox,
        prompt: PromptBuilder,
        *,
        task_dir: TaskDir,
        ledger: Ledger,
        budget: TaskBudget,
        prices: PriceTable,
        settings: ProviderSettings | None = None,
        repair_budget: int = 3,
        max_turns: int = 30,
        write_tools: str = "your write tool",
    ) -> None:
        self.role = role
        """Role name (also the transcripts subfolder)."""
        self.provider = provider
        """Who answers."""
        self.tools = tools
        """The role's tools, and only those."""
        self.prompt = prompt
        """Builds the system prompt of a stage."""
        self.task_dir = task_dir
        """The task folder."""
        self.ledger = ledger
        """Where every exchange is summarized."""
        self.budget = budget
        """The task's shared budget."""
        self.prices = prices
        """K's price table."""
        self.settings = settings or ProviderSettings()
        """Timeout, token limit and retries."""
        self.repair_budget = repair_budget
        """Invalid writes sent back for repair before the stage fails."""
        self.max_turns = max_turns
        """Most model calls in one stage."""
        self.write_tools = write_tools
        """How the kickoff message names the write tool(s)."""
        self.transcripts = TranscriptWriter(task_dir.transcripts_dir / role)
        """Writes `transcripts/<role>/NNNN.json`."""
        if provider.price_model not in prices.models:
            raise input_error(
                f"model {provider.price_model!r} has no price in the capability layer's table, so its cost cannot be "
                "accounted or budgeted",
                field=f"roles.{role}.model",
                expected="one of: "
                + ", ".join(sorted(m for m, p in prices.models.items() if p.provider == provider.name) or sorted(prices.models)),
            )

    @property
    def actor(self) -> LedgerActor:
        """The ledger actor of this role."""
        return LedgerActor(role=self.role, provider=self.provider.name, model=self.provider.model)

    # ------------------------------------------------------------------ the loop

    def kickoff(self, task: RoleTask) -> str:
        """The first user message of a stage."""
        text = (
            f"Stage: {task.stage.value}. Work with your tools, then write {', '.join(task.writes)} with {self.write_tools}. "
            "A write is validated; if it is refused, fix every problem listed and write the complete artifact again."
        )
        if task.instructions:
            text += "\n\n" + task.instructions
        return text

    def run(self, task: RoleTask) -> RoleResult:
        """Work one stage to completion. Raises StageFailed (recorded as a rejection in the ledger)
        when the role cannot write a valid artifact within its repair budget or turn limit,
        BudgetExhausted when the task's budget cannot pay for the next call, ProviderError when a
        call fails for good."""
        system = self.prompt(task)
        conversation = f"{self.role}-{task.stage.value}-{uuid.uuid4().hex[:8]}"
        context = ToolContext(role=self.role, task=task, provider=self.provider.name, model=self.provider.model)
        first = Message.user(self.kickoff(task))
        messages: list[Message] = [first]
        unrecorded: list[Message] = [first]  # sent to the model but not yet in any transcript
        result = RoleResult(role=self.role, stage=task.stage)
        failures, last_error = 0, ""

        for turn in range(1, self.max_turns + 1):
            ex = _Exchange(task, conversation, turn, system, self._request(system, messages, task, conversation, turn), unrecorded)
            response = self._call(ex)
            messages.append(response.as_message())
            try:
                for call in response.tool_calls:
                    tool_result, write = self.tools.run(call, context)
                    ex.results.append(tool_result)
                    if write is not None:
                        ex.writes.append(write)
            except Exception as crash:
                # A tool bug must not hide a billed call: account for it and record it, then let it surface.
                ex.crash = f"a tool crashed: {type(crash).__name__}: {crash}"
                self._settle(ex)
                raise
            path = self._settle(ex)
            if ex.results:
                messages.append(Message("user", tuple(ex.results)))
            for write in ex.writes:
                if write.ok:
                    result.written[write.artifact] = write
                else:
                    failures += 1
                    last_error = write.error or "refused"
            result.transcripts.append(path)
            result.input_tokens += response.usage.input_tokens
            result.output_tokens += response.usage.output_tokens
            result.usd += ex.usd
            if response.text:
                result.final_text = response.text
            unrecorded = []

            missing = [w for w in task.writes if w not in result.written]
            if not missing and (task.finish == "on_write" or not response.tool_calls):
                return result
            if not response.tool_calls:
                failures += 1
                last_error = f"the answer ended without a valid {', '.join(missing)} written"
            if failures > self.repair_budget:
                self._fail(task, failures, last_error, f"{failures} refused attempt(s), repair budget {self.repair_budget}")
            if not response.tool_calls:
                nudge = Message.user(
                    f"Not done: this stage needs {', '.join(missing)} written with {self.write_tools}. Continue with your tools."
                )
                messages.append(nudge)
                unrecorded = [nudge]
        self._fail(task, failures, last_error or "no valid artifact written", f"turn limit {self.max_turns} reached")

    # ------------------------------------------------------------------ one call

    def _request(self, system: str, messages: list[Message], task: RoleTask, conversation: str, turn: int) -> ModelRequest:
        """The next request, refused (and recorded) when the budget cannot pay for it."""
        draft = ModelRequest(system=system, messages=tuple(messages), tools=self.tools.specs(), max_output_tokens=1)
        estimate = estimate_request_tokens(draft) + 1
        reason = self.budget.refusal(estimate, self.prices.cost_usd(self.provider.price_model, estimate, 1))
        if reason is not None:
            self.ledger.append(
                stage=task.stage,
                event=LedgerEvent.llm_call,
                outcome=LedgerOutcome.skipped,
                reason=reason,
                actor=self.actor,
                details={
                    "budget": self.budget.state().to_json(),
                    "conversation": conversation,
                    "turn": turn,
                    "estimated_tokens": estimate,
                },
            )
            log.warning("%s: %s", self.role, reason)
            raise BudgetExhausted(reason)
        max_out = max(1, min(self.settings.max_output_tokens, self.budget.remaining_tokens - estimate))
        return ModelRequest(system=system, messages=tuple(messages), tools=draft.tools, max_output_tokens=max_out)

    def _call(self, ex: _Exchange) -> ModelResponse:
        """Ask the provider (with retries) and note the answer in `ex`; a final failure is recorded, then raised."""
        t0 = time.monotonic()
        what = f"{self.role} {self.provider.name}/{self.provider.model}"
        try:
            ex.response, ex.retries = call_with_retries(lambda: self.provider.complete(ex.request), self.settings.retry, what=what)
        except ProviderError as error:
            ex.retries = list(getattr(error, "retries", []))
            ex.latency = time.monotonic() - t0
            ex.crash = str(error)
            self._write(ex)
            raise
        ex.latency = time.monotonic() - t0
        return ex.response

    def _settle(self, ex: _Exchange) -> Path:
        """Price the answered call, charge the budget, and record the exchange; returns its transcript."""
        assert ex.response is not None
        usage = ex.response.usage
        ex.usd = self.prices.cost_usd(self.provider.price_model, usage.input_tokens, usage.output_tokens)
        self.budget.charge(usage.total, ex.usd)
        return self._write(ex)

    # ------------------------------------------------------------------ records

    def _write(self, ex: _Exchange) -> Path:
        """Write the exchange's transcript and its ledger entry; returns the transcript path."""
        response = ex.response
        usage = response.usage if response is not None else Usage()
        record: dict[str, Any] = {
            "role": self.role,
            "stage": ex.task.stage.value,
            "conversation": ex.conversation,
            "turn": ex.turn,
            "provider": self.provider.name,
            "model": self.provider.model,
            "price_model": self.provider.price_model,
            "started_at": ex.started.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "latency_s": round(ex.latency, 3),
            "attempts": len(ex.retries) + 1,
            "retries": [r.to_json() for r in ex.retries],
            "request": {
                # The rendered prompt is stored in full once per conversation; later turns name its hash.
                "system": ex.system if ex.turn == 1 else None,
                "system_sha256": sha256_bytes(ex.system.encode()),
                "sent": [self.transcripts.message(m) for m in ex.sent],
                "history_messages": len(ex.request.messages),
                "tools": [t.name for t in ex.request.tools],
                "max_output_tokens": ex.request.max_output_tokens,
            },
            "response": self.transcripts.response(response) if response is not None else None,
            "tool_results": [self.transcripts.part(r) for r in ex.results],
            "writes": [self._write_json(w) for w in ex.writes],
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            "cost_usd": ex.usd,
            "error": redact(ex.crash) if ex.crash else None,
        }
        path = self.transcripts.write(record)
        rel = path.relative_to(self.task_dir.root).as_posix()
        outputs = {rel: transcript_hash(path)}
        for w in ex.writes:
            if w.ok and w.path is not None and w.sha256:
                outputs[self._rel(w.path)] = w.sha256
        names = [c.name for c in response.tool_calls] if response is not None else []
        if response is None:
            summary = f"{self.role} turn {ex.turn}: {ex.crash}"
        else:
            summary = f"{self.role} turn {ex.turn}: " + (f"called {', '.join(names)}" if names else "answered without tool calls")
            for w in ex.writes:
                summary += f"; {w.artifact} " + ("written" if w.ok else "refused")
            if ex.crash:
                summary += f"; {ex.crash}"
        details: dict[str, Any] = {
            "transcript": rel,
            "conversation": ex.conversation,
            "turn": ex.turn,
            "latency_s": round(ex.latency, 3),
            "attempts": len(ex.retries) + 1,
            "retries": [r.error[:300] for r in ex.retries],
        }
        if response is not None:
            details["tool_calls"] = names
            details["writes"] = [
                {"artifact": w.artifact, "ok": w.ok, **({} if w.ok else {"error": redact(w.error or "")[:_LEDGER_ERROR_CHARS]})}
                for w in ex.writes
            ]
            details["response_model"] = response.model
        self.ledger.append(
            stage=ex.task.stage,
            event=LedgerEvent.llm_call,
            outcome=LedgerOutcome.error if ex.crash else LedgerOutcome.ok,
            reason=redact(summary)[:_LEDGER_ERROR_CHARS],
            actor=self.actor,
            outputs=outputs,
            cost=LedgerCost(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, usd=ex.usd),
            details=details,
        )
        log.info("%s (%s/%s) %s: %s", self.role, self.provider.name, self.provider.model, ex.task.stage.value, redact(summary))
        return path

    def _rel(self, path: Path) -> str:
        try:
            return Path(path).resolve().relative_to(self.task_dir.root.resolve()).as_posix()
        except ValueError:
            return str(path)

    def _write_json(self, write: WriteOutcome) -> dict[str, Any]:
        return {
            "artifact": write.artifact,
            "ok": write.ok,
            "file": self._rel(write.path) if write.path else None,
            "sha256": write.sha256,
            "error": write.error,
        }

    def _fail(self, task: RoleTask, failures: int, last_error: str, why: str) -> NoReturn:
        """Record the stage's failure as a rejection routed back to the stage, then raise StageFailed."""
        missing = ", ".join(task.writes)
        reason = redact(
            f"{self.role} could not write a valid {missing} ({why}); last error: {last_error.splitlines()[0] if last_error else ''}"
        )
        self.ledger.append(
            stage=task.stage,
            event=LedgerEvent.rejection,
            outcome=LedgerOutcome.fail,
            reason=reason[:_LEDGER_ERROR_CHARS],
            actor=self.actor,
            route_to=task.stage,
            details={"last_error": redact(last_error)[:4000], "refused_attempts": failures, "repair_budget": self.repair_budget},
        )
        raise StageFailed(reason, stage=task.stage.value, role=self.role, last_error=last_error)

