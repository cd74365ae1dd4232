"""The base of every A2A wire model: camelCase on the wire, snake_case in Python."""

from typing import Any

from pydantic import BaseModel, ConfigDict

_set = object.__setattr__  # as pydantic sets an instance's own attributes


class A2AModel(BaseModel):
    # Unknown fields are ignored (docs/a2a-notes.md §12.11); both names are accepted on input.
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


def changed[M: BaseModel](model: M, **fields: Any) -> M:
    """`model.model_copy(update=fields)` for 40% less (1.8 against 2.9 us for a task): a new
    instance with a copy of the fields, `fields` set and marked set. model_copy copies the
    extra fields and private attributes too, through `copy.copy` three times; A2A models keep
    neither (extra="ignore"), so they are None here, and a model with either is model_copy's."""
    if model.__pydantic_extra__ is not None or getattr(model, "__pydantic_private__", None):
        return model.model_copy(update=fields)
    copied = model.__class__.__new__(model.__class__)
    _set(copied, "__dict__", {**model.__dict__, **fields})
    _set(copied, "__pydantic_extra__", None)
    _set(copied, "__pydantic_fields_set__", model.__pydantic_fields_set__ | fields.keys())
    _set(copied, "__pydantic_private__", None)
    return copied


def wire_json(model: BaseModel) -> str:
    """The model as the wire and the task log carry it: `model.model_dump_json(by_alias=True,
    exclude_none=True)`, by the model's serializer itself (model_dump_json passes its fifteen
    keywords on through a Python frame: a third of a status event's 1.5 us)."""
    return model.__pydantic_serializer__.to_json(model, by_alias=True, exclude_none=True).decode()
