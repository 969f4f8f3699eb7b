FROM python:3.11-slim

# The gateway runs as this numeric user (Kubernetes checks runAsNonRoot against a number only) on
# a read-only root file system: it has no home to write to, and Python writes no bytecode caches
# (pip compiled them at install time).
RUN groupadd --system --gid 10001 notifier \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin notifier
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY notifier ./notifier
COPY lua ./lua
RUN pip install --no-cache-dir . && rm -rf /src

USER 10001:10001
WORKDIR /
# One gateway process per container: an orchestrator scales by containers (pods), each with its own
# CPU share. On a host of its own, NOTIFIER_WORKERS=auto runs one per CPU (docs/operations/workers.md).
ENV NOTIFIER_HOST=0.0.0.0 \
    NOTIFIER_PORT=8080 \
    NOTIFIER_WORKERS=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD python -c "import os,urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('NOTIFIER_PORT', '8080'), timeout=2)"
ENTRYPOINT ["notifier"]
CMD ["serve"]
