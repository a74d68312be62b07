# Build a static gatefold binary, then ship it alone on distroless as nonroot.
FROM golang:1.27 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY certs/ certs/
COPY claims/ claims/
COPY cmd/ cmd/
COPY fold/ fold/
COPY internal/ internal/
COPY merger/ merger/
COPY routing/ routing/
COPY rules/ rules/
COPY webhook/ webhook/
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${REVISION}" -o /out/gatefold ./cmd/gatefold

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/gatefold /gatefold
USER 65532:65532
ENTRYPOINT ["/gatefold"]
CMD ["manager"]
