FROM python:3.11-slim

RUN useradd --create-home --uid 10001 notifier
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY notifier ./notifier
COPY lua ./lua
RUN pip install --no-cache-dir . && rm -rf /src

USER notifier
WORKDIR /home/notifier
ENV NOTIFIER_HOST=0.0.0.0 \
    NOTIFIER_PORT=8080 \
    PYTHONUNBUFFERED=1
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD python -c "import os,urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('NOTIFIER_PORT', '8080'), timeout=2)"
ENTRYPOINT ["notifier"]
CMD ["serve"]
