"""The rerankers and answers that need a model: a cross-encoder from a local directory, and an
LLM behind an OpenAI-compatible chat API.

No PyPI package ships cross-encoder weights, so the test builds a small ONNX model of its own
(its score of a pair is how often one word's token appears in it) and the product loads and
runs it like any cross-encoder, with the real MiniLM tokenizer. The LLM is a test double of a
hosted chat API (these machines reach none): it grades passages by the words they share with
the question and answers citing [1], in the wire format of OpenAI's chat completions.
"""

import shutil
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from tokenizers import Tokenizer

from agentic_rag.embedding.embedders import default_tokenizer_path
from tests.support.knowledge import Caller, KnowledgeChatDouble
from tests.support.live import LiveServer, live_server, serve_in_thread
from tests.support.outcomes import failure, output
from tests.support.security import create_key

PASSAGES = """# Bread

Sourdough bread rises slowly with wild yeast.

## Crust

A crust gets crisp with steam; a thick crust needs a long bake, and the crust darkens with sugar.

## Storage

Keep bread in a linen bag; a crust softens in plastic.
"""


def counting_cross_encoder(directory: Path, word: str) -> int:
    """An ONNX 'cross-encoder' whose logit for a pair is the count of `word`'s token in it."""
    tokenizer = Tokenizer.from_file(str(default_tokenizer_path()))
    tokenizer.no_padding()
    (token,) = tokenizer.encode(word, add_special_tokens=False).ids
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    nodes = [
        helper.make_node("Equal", ["input_ids", "word"], ["hits"]),
        helper.make_node("Cast", ["hits"], ["ones"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["ones", "axis"], ["logits"], keepdims=1),
    ]
    constants = [
        helper.make_tensor("word", TensorProto.INT64, [], [token]),
        helper.make_tensor("axis", TensorProto.INT64, [1], [1]),
    ]
    graph = helper.make_graph(nodes, "counting", inputs, [logits], initializer=constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(directory / "model.onnx"))
    shutil.copy(default_tokenizer_path(), directory / "tokenizer.json")
    return token


@pytest.fixture
def chat() -> Iterator[tuple[KnowledgeChatDouble, str]]:
    double = KnowledgeChatDouble()
    with serve_in_thread(double.app()) as url:
        yield double, f"{url}/v1"


@pytest.fixture
def server(
    database_url: str, data_dir: Path, tmp_path: Path, chat: tuple[KnowledgeChatDouble, str]
) -> Iterator[tuple[LiveServer, Caller]]:
    counting_cross_encoder(tmp_path / "cross-encoder", "crust")
    key = create_key(database_url, "alpha", ["read", "write"])
    with live_server(
        None,
        database_url=database_url,
        data_dir=data_dir,
        reranker_directory=tmp_path / "cross-encoder",
        llm_base_url=chat[1],
        llm_model="test-model",
    ) as live:
        caller = Caller(live.url, key)
        output(caller.skill("ingest_text", text=PASSAGES, title="Bread"))
        yield live, caller
        caller.client.close()


def test_the_cross_encoder_orders_by_its_scores(server: tuple[LiveServer, Caller]) -> None:
    _, alpha = server
    result = output(
        alpha.skill("query_with_reranking", query="bread", reranker="cross-encoder", top_k=3)
    )
    explained = output(alpha.skill("explain_answer", trajectory_id=result["trajectory_id"]))
    after = explained["rerank"]["after"]
    texts = {h["provenance"]["chunk_id"]: h["text"] for h in result["hits"]}
    scores = [r["score"] for r in after]
    assert scores == sorted(scores, reverse=True)
    for ranked in after[:3]:  # each score is the model's: the count of "crust" in the pair
        assert ranked["score"] == texts[ranked["chunk_id"]].lower().count("crust")
    assert "crust" in result["hits"][0]["text"].lower()


def test_with_an_llm_answers_are_synthesised_and_it_can_rerank(
    server: tuple[LiveServer, Caller], chat: tuple[KnowledgeChatDouble, str]
) -> None:
    _, alpha = server
    answered = output(alpha.ask("How does a crust get crisp?"))
    assert answered["answer"]["mode"] == "llm"
    assert (
        answered["answer"]["text"] == "According to the sources, steam makes the crust crisp [1]."
    )
    # The LLM got the numbered sources and the question.
    sources = chat[0].requests[-1]["messages"][-1]["content"]
    assert "[1] " in sources and "Question: How does a crust get crisp?" in sources

    graded = output(
        alpha.skill("query_with_reranking", query="keep bread linen", reranker="llm", top_k=2)
    )
    assert "linen" in graded["hits"][0]["text"]
    explained = output(alpha.skill("explain_answer", trajectory_id=graded["trajectory_id"]))
    assert explained["rerank"]["reranker"] == "llm"
    best = output(alpha.skill("hybrid_retrieve", query="crust", use_reranking=True))
    plan = output(alpha.skill("explain_answer", trajectory_id=best["trajectory_id"]))["plan"]
    assert plan["reranker"] == "llm"  # the best one configured


def test_an_llm_that_fails_fails_the_call_with_its_reason(
    database_url: str, data_dir: Path
) -> None:
    key = create_key(database_url, "alpha", ["read", "write"])
    with live_server(
        None,
        database_url=database_url,
        data_dir=data_dir,
        llm_base_url="http://127.0.0.1:9/v1",  # nothing listens there
        llm_model="test-model",
    ) as live:
        caller = Caller(live.url, key)
        output(caller.skill("ingest_text", text=PASSAGES, title="Bread"))
        message = failure(caller.ask("How does a crust get crisp?"))
        caller.client.close()
    assert "the LLM endpoint cannot be reached" in message
