# agentic-rag: the service on its embedded PostgreSQL, or on DATABASE_URL when set.
# The build context is what .dockerignore lets in: pyproject.toml, uv.lock, README.md and src/.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
RUN pip install --no-cache-dir uv==0.13.9 && useradd --create-home --uid 10001 agent

WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
COPY src ./src
# /data is made here, owned by the user, so that a new volume mounted there (Docker copies the
# image's ownership into it) lets the embedded PostgreSQL start.
RUN uv sync --frozen --no-dev && mkdir /data && chown -R agent /app /data

# Not root: the embedded PostgreSQL then runs as this user too.
USER agent
VOLUME /data
EXPOSE 8000
# A container listens on all interfaces, so credentials are required (an API key or JWT):
# create the first key before the first start (docs/operations.md, "In a container").
CMD ["/app/.venv/bin/agentic-rag", "serve", "--host", "0.0.0.0", "--port", "8000", "--data-dir", "/data"]
