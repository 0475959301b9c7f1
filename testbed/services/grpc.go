package services

import (
	"context"
	"fmt"
	"net"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// AppGRPCService is the app's gRPC service: one unary method per op
// (GRPCMethod), taking and returning google.protobuf.Empty, because the method
// says everything the op needs. There is no .proto to compile: the service is
// described by hand, and the messages are protobuf's well-known types.
const AppGRPCService = "tierscope.testbed.v1.AppService"

// truthMetadata is TruthParentHeader as gRPC metadata (keys are lower case).
const truthMetadata = "x-tierscope-truth-parent"

// GRPCMethod is the gRPC method of an app op, in the usual CamelCase:
// "get_item" → "GetItem". Span names are AppGRPCService + "/" + method on both
// sides, as gRPC instrumentations name them.
func GRPCMethod(op string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(op, func(r rune) bool { return r == '_' || r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// GRPCServer serves every op as a unary method of AppGRPCService; two ops whose
// methods would be the same name are an error.
func (a *App) GRPCServer() (*grpc.Server, error) {
	desc := grpc.ServiceDesc{ServiceName: AppGRPCService, HandlerType: (*any)(nil), Metadata: "tierscope/testbed/v1/app.proto"}
	seen := map[string]string{}
	for _, name := range sortedNames(a.tier.Config.Ops) {
		method := GRPCMethod(name)
		if other, ok := seen[method]; ok {
			return nil, fmt.Errorf("app: ops %q and %q are both gRPC method %s", other, name, method)
		}
		seen[method] = name
		desc.Methods = append(desc.Methods, grpc.MethodDesc{
			MethodName: method,
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				return a.serveGRPC(ctx, name, method, dec)
			},
		})
	}
	s := grpc.NewServer()
	s.RegisterService(&desc, a)
	return s, nil
}

func rpcAttrs(method string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("rpc.system", "grpc"),
		attribute.String("rpc.service", AppGRPCService),
		attribute.String("rpc.method", method),
	}
}

// serveGRPC is an op's SERVER span and work for a gRPC call.
func (a *App) serveGRPC(ctx context.Context, name, method string, dec func(any) error) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	attrs := rpcAttrs(method)
	if p, ok := peer.FromContext(ctx); ok {
		if local, ok := p.LocalAddr.(*net.TCPAddr); ok {
			attrs = append(attrs, a.conv.localAddr(local.IP.String(), local.Port)...)
		}
		attrs = append(attrs, a.conv.peer(p.Addr)...)
	}
	if truth := md.Get(truthMetadata); len(truth) > 0 {
		attrs = append(attrs, attribute.String(attrTruthParent, truth[0]))
	}
	ctx, span := a.tracer.Start(propagator.Extract(ctx, mdCarrier(md)), AppGRPCService+"/"+method,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	defer span.End()
	err := dec(new(emptypb.Empty))
	code := codes.InvalidArgument
	if err == nil {
		code = codes.Unavailable // a tier's failures are its dependencies'
		err = a.runOp(ctx, name, a.tier.Config.Ops[name])
	}
	if err != nil {
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, err.Error())
		return nil, status.Error(code, err.Error())
	}
	span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(codes.OK)))
	return &emptypb.Empty{}, nil
}

// appClient calls one app replica over gRPC under CLIENT spans.
type appClient struct {
	tracer trace.Tracer
	conv   conv
	conn   *grpc.ClientConn
	host   string
	port   int
}

func newAppClient(t Tier, tracer trace.Tracer, cv conv, addr string) (*appClient, error) {
	host, port, ok := splitHostPort(addr)
	if !ok {
		return nil, fmt.Errorf("app gRPC address %q: want host:port", addr)
	}
	dial := t.dial()
	// passthrough: the address is dialled as given, through the tier's dialer
	// (its network namespace), with no resolver in between.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, "tcp", a) }))
	if err != nil {
		return nil, err
	}
	return &appClient{tracer: tracer, conv: cv, conn: conn, host: host, port: port}, nil
}

func (c *appClient) call(ctx context.Context, op string, drop bool) error {
	method := GRPCMethod(op)
	ctx, span := c.tracer.Start(ctx, AppGRPCService+"/"+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(rpcAttrs(method), c.conv.serverAddr(c.host, c.port)...)...))
	defer span.End()
	md := metadata.MD{}
	if drop {
		md.Set(truthMetadata, span.SpanContext().SpanID().String())
	} else {
		propagator.Inject(ctx, mdCarrier(md))
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, md), CallTimeout)
	defer cancel()
	var p peer.Peer
	err := c.conn.Invoke(ctx, "/"+AppGRPCService+"/"+method, &emptypb.Empty{}, new(emptypb.Empty), grpc.Peer(&p))
	span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(status.Code(err))))
	span.SetAttributes(c.conv.peer(p.Addr)...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, err.Error())
	}
	return err
}

// mdCarrier carries W3C trace context in gRPC metadata.
type mdCarrier metadata.MD

func (m mdCarrier) Get(key string) string {
	if v := metadata.MD(m).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (m mdCarrier) Set(key, value string) { metadata.MD(m).Set(key, value) }

func (m mdCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
