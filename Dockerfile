# turn-manager in a container: built in a Rust image, run in a small Debian one as a non-root user, with the state
# folder as a volume. `docker build -t turn-manager .` then, for example:
#   docker run -e DISCORD_TOKEN -v tm-state:/var/lib/turn-manager/state turn-manager
# Personas are baked in from personas/; mount your own over /etc/turn-manager/personas instead.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# The dependencies first, so that a change of the bot's code does not build them again.
COPY Cargo.toml Cargo.lock ./
COPY local-discord/Cargo.toml local-discord/
RUN mkdir -p src benches local-discord/src \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs local-discord/src/lib.rs \
    && echo 'fn main() {}' > benches/core.rs \
    && cargo build --release --locked --bin turn-manager || true
COPY . .
RUN touch src/main.rs src/lib.rs local-discord/src/lib.rs && cargo build --release --locked --bin turn-manager

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/turn-manager turn-manager \
    && mkdir -p /var/lib/turn-manager/state /etc/turn-manager \
    && chown -R turn-manager:turn-manager /var/lib/turn-manager
COPY --from=build /src/target/release/turn-manager /usr/local/bin/turn-manager
COPY personas /etc/turn-manager/personas
USER turn-manager
WORKDIR /var/lib/turn-manager
VOLUME ["/var/lib/turn-manager/state"]
# The metrics on the container's loopback, for the HEALTHCHECK: healthy while every gateway shard is connected. Set
# TM_METRICS=0.0.0.0:9184 (and publish the port) to scrape them from outside; `health` reads the same variable.
ENV TM_METRICS=127.0.0.1:9184
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["turn-manager", "health"]
# SIGTERM (docker stop) is a graceful shutdown: what is in hand is finished and saved within a few seconds, up to some
# 30 s with sessions in a Postgres that does not answer (`docker stop -t 35`; the compose file sets it).
STOPSIGNAL SIGTERM
ENTRYPOINT ["turn-manager"]
CMD ["run", "--personas", "/etc/turn-manager/personas", "--state", "/var/lib/turn-manager/state"]
