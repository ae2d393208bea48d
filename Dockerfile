# syntax=docker/dockerfile:1
# Portico's container image. At the repository root because the build needs the whole Cargo
# workspace as its context and `docker build .` then needs no flags (this .dockerignore
# applies to every builder). Two runtime targets:
#   docker build -t portico .                          the built-in proxy (distroless, default)
#   docker build --target haproxy -t portico:haproxy . with haproxy, for --provider haproxy
# Both run as 65532:65532 with no shell in the default one; deploy/ runs them with a read-only
# root filesystem. See docs/kubernetes.md.

# The workspace's toolchain (1.95) on the same Debian release as the runtime images.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p portico \
    && cp target/release/portico /portico

# --provider haproxy: Debian's haproxy (2.6, as the tests use). util-linux (essential, so
# already here) has the flock(1) that guards haproxy: it stops it when Portico is killed.
FROM debian:bookworm-slim AS haproxy
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       haproxy ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /portico /portico
USER 65532:65532
EXPOSE 8080 8443 9180
ENTRYPOINT ["/portico"]

# The default target: glibc and libgcc only, no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot AS proxy
COPY --from=build /portico /portico
USER 65532:65532
EXPOSE 8080 8443 9180
ENTRYPOINT ["/portico"]
