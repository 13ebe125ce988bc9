module github.com/gorun-dev/gorun

go 1.26.8

require (
	github.com/klauspost/cpuid/v2 v2.4.2
	github.com/sashabaranov/go-openai v1.43.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/ollama/ollama v0.17.4
)

require (
	github.com/bahlo/generic-list-go v0.2.0 // indirect
	github.com/buger/jsonparser v1.1.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mailru/easyjson v0.7.7 // indirect
	github.com/wk8/go-ordered-map/v2 v2.1.8 // indirect
	golang.org/x/crypto v0.43.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
