module github.com/acpcompact/acpcompact

go 1.26.0

require github.com/santhosh-tekuri/jsonschema/v6 v6.0.3

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.14.0 // indirect
)
