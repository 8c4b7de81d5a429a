package silatest_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// TestFakeWireRules checks the fake against the SiLA wire rules with a raw
// gRPC client: metadata on SiLAService is refused with NO_METADATA_ALLOWED,
// unknown methods are UNIMPLEMENTED, and a missing parameter is a
// ValidationError naming it.
func TestFakeWireRules(t *testing.T) {
	srv, err := silatest.New(silatest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddFeature(silatest.GreetingProviderFDL, silatest.Greeter(2024)); err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fw := srv.Framework()
	svcFDL, _ := sila2.ParseFDL([]byte(sila2.SiLAServiceFDL))
	svc, _ := sila2.Compile(fw, svcFDL)
	greetFDL, _ := sila2.ParseFDL([]byte(silatest.GreetingProviderFDL))
	greet, _ := sila2.Compile(fw, greetFDL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	md, _ := svc.Method("Get_ServerName")
	withMeta := metadata.AppendToOutgoingContext(ctx, sila2.MetadataKey(sila2.LockControllerID+"/Metadata/LockIdentifier"), "x")
	err = conn.Invoke(withMeta, svc.Path("Get_ServerName"), dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output()))
	se, ok := sila2.AsSiLAError(fw.DecodeError(err))
	if !ok || se.Kind != sila2.KindFramework || se.FrameworkType != sila2.FrameworkNoMetadataAllowed {
		t.Fatalf("metadata on SiLAService: %v", err)
	}

	err = conn.Invoke(ctx, "/sila2.org.example.none.nope.v1.Nope/Get_X", dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output()))
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}

	hello, _ := greet.Method("SayHello")
	err = conn.Invoke(ctx, greet.Path("SayHello"), dynamicpb.NewMessage(hello.Input()), dynamicpb.NewMessage(hello.Output()))
	se, ok = sila2.AsSiLAError(fw.DecodeError(err))
	if !ok || se.Kind != sila2.KindValidation || se.Parameter != "org.silastandard/examples/GreetingProvider/v1/Command/SayHello/Parameter/Name" {
		t.Fatalf("missing parameter: %v", err)
	}
	if n := srv.Calls("GreetingProvider/SayHello"); n != 0 {
		t.Fatalf("an invalid call reached the handler %d times", n)
	}
}
