# One image for the web app, the control worker and the agent (docker-compose.yml).
FROM python:3.11-slim-bookworm
# The web server listens on every interface in a container, so settings keep
# DEBUG off (and refuse DEBUG=true): no tracebacks leave the container.
# Static files come from whitenoise at start; no collectstatic step.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 BENCHLAB_BIND=0.0.0.0
WORKDIR /app
# bubblewrap: the sandbox the agent runs every job program in (agents/sandbox.py).
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
EXPOSE 8000
CMD ["sh", "-c", "exec python -m uvicorn benchlab.asgi:application --host \"$BENCHLAB_BIND\" --port 8000"]
