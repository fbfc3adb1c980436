# syntax=docker/dockerfile:1
#
# mcpgw container images. Two targets:
#
#   runtime (the default, last stage): Debian slim with Node.js/npm and
#     Python 3 with uv/uvx, so stdio servers started as `npx ...` or
#     `uvx ...` work inside the container.
#       docker build -t mcpgw:dev .
#   static: distroless, the binary only; for gateways whose servers are all
#     remote (transport http or sse).
#       docker build --target static -t mcpgw:dev-static .
#
# --build-arg VERSION=v1.2.3 sets what `mcpgw version` prints.
# Both run as a non-root user and expect the config at
# /etc/mcpgw/mcpgw.yaml and a writable data_dir (the chart mounts /data).

ARG GO_VERSION=1.26
ARG NODE_VERSION=24
ARG UV_VERSION=0.9

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/mcpgw ./cmd/mcpgw

# The static image: no shell, no package manager, uid 65532 ("nonroot").
FROM gcr.io/distroless/static-debian12:nonroot AS static
COPY --from=build /out/mcpgw /usr/local/bin/mcpgw
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mcpgw", "serve", "--config", "/etc/mcpgw/mcpgw.yaml"]

FROM ghcr.io/astral-sh/uv:${UV_VERSION} AS uv

# The runtime image: Node.js and npm from the node image, Python 3 from
# Debian, uv and uvx from the official uv image.
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=uv /uv /uvx /usr/local/bin/
COPY --from=build /out/mcpgw /usr/local/bin/mcpgw
RUN groupadd --gid 10001 mcpgw \
 && useradd --uid 10001 --gid 10001 --home-dir /home/mcpgw --create-home --shell /usr/sbin/nologin mcpgw \
 && mkdir -p /etc/mcpgw /data \
 && chown 10001:10001 /data
# HOME must be writable: npx and uvx keep their caches under it (the chart
# mounts an emptyDir there, as the root filesystem is read-only). uv uses
# Debian's python3 rather than downloading one.
ENV HOME=/home/mcpgw \
    UV_PYTHON_PREFERENCE=only-system \
    NPM_CONFIG_UPDATE_NOTIFIER=false
USER 10001:10001
WORKDIR /home/mcpgw
EXPOSE 8080
ENTRYPOINT ["mcpgw", "serve", "--config", "/etc/mcpgw/mcpgw.yaml"]
