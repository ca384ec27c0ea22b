module github.com/acpcompact/acpcompact/test/storebench

go 1.26.0

require (
	github.com/acpcompact/acpcompact v0.0.0
	go.etcd.io/bbolt v1.5.0
)

require golang.org/x/sys v0.48.0 // indirect

replace github.com/acpcompact/acpcompact => ../..
