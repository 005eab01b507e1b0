# Static codexpool binary on a distroless base, running as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/codexpool ./cmd/codexpool

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/codexpool /usr/local/bin/codexpool
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/codexpool"]
CMD ["worker"]
