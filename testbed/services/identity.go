package services

import (
	"crypto/sha256"
	"encoding/hex"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tierscope/tierscope/testbed/config"
)

// Identity is who reports spans: a tier instance, or an in-process client
// library inside one (config clients) that reports under its back end's
// service.name, with no service.instance.id, as some SDKs do for database and
// cache clients. StackOptions.Reporter builds a resource from it.
type Identity struct {
	Service  string // service.name
	Instance string // service.instance.id; "" for a client library
	Version  string // service.version; "" for a client library
	// Process is the tier instance whose process reports (e.g. "app-1"), and
	// Client the client library ("cache", "db"; "" for the tier itself).
	Process string
	Client  string
	// The process's resource attributes, fake and distinct per tier instance
	// because the stack runs every tier in one OS process; empty or 0 where the
	// reporter does not share them (a client with resource: host has only
	// HostName).
	HostName    string
	PID         int
	ContainerID string
}

// Attributes are the resource attributes of the identity, empty ones left out.
func (id Identity) Attributes() []attribute.KeyValue {
	kv := []attribute.KeyValue{attribute.String("service.name", id.Service)}
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, attribute.String(k, v))
		}
	}
	add("service.instance.id", id.Instance)
	add("service.version", id.Version)
	add("host.name", id.HostName)
	if id.PID > 0 {
		kv = append(kv, attribute.Int("process.pid", id.PID))
	}
	add("container.id", id.ContainerID)
	return kv
}

// processIdentity is the n-th process of a stack (n from 0, in start order):
// host.name "<instance>.testbed", a pid from 1001, a 64-hex container id.
func processIdentity(service, instance, version string, n int) Identity {
	sum := sha256.Sum256([]byte("tierscope-testbed/" + instance))
	return Identity{Service: service, Instance: instance, Version: version, Process: instance,
		HostName: instance + ".testbed", PID: 1001 + n, ContainerID: hex.EncodeToString(sum[:])}
}

// clientIdentity is a client library inside the process p, sharing what share
// says (config.ShareProcess or config.ShareHost).
func clientIdentity(p Identity, client, service, share string) Identity {
	id := Identity{Service: service, Process: p.Process, Client: client, HostName: p.HostName}
	if share != config.ShareHost {
		id.PID, id.ContainerID = p.PID, p.ContainerID
	}
	return id
}
