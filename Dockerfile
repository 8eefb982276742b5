# nodewarden's image: a static release binary in a distroless base, run as
# a non-root user. `cargo xtask image` builds the same binary on the host
# and runs this build when a Docker engine answers; see docs/operations.md.
#
#   docker build -t nodewarden:0.1.0 .
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
ARG TARGET=x86_64-unknown-linux-musl
RUN rustup target add ${TARGET} \
 && apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# A static binary: musl, and the C parts (ring) built with musl-gcc.
RUN CC_x86_64_unknown_linux_musl=musl-gcc \
    cargo build --release --locked -p nodewarden --target ${TARGET} \
 && cp target/${TARGET}/release/nodewarden /nodewarden

# No shell, no package manager; 65532 is distroless's "nonroot" user, the
# same as the Deployment's runAsUser.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /nodewarden /nodewarden
USER 65532:65532
EXPOSE 10257
ENTRYPOINT ["/nodewarden"]
CMD ["run"]
