module github.com/gorun-dev/gorun

go 1.26.8

require (
	github.com/klauspost/cpuid/v2 v2.4.2
	github.com/sashabaranov/go-openai v1.43.0
	golang.org/x/sys v0.49.0
)

require github.com/ardanlabs/jinja v1.8.0
