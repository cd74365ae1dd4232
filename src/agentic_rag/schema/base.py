"""The base of every A2A wire model: camelCase on the wire, snake_case in Python."""

from pydantic import BaseModel, ConfigDict


class A2AModel(BaseModel):
    # Unknown fields are ignored (docs/a2a-notes.md §12.11); both names are accepted on input.
    model_config = ConfigDict(populate_by_name=True, extra="ignore")
