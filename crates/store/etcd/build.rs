//! Generates the etcd v3 API's messages and gRPC clients from `proto/etcd.proto` with protox
//! (a protobuf compiler written in Rust) and tonic-prost-build: no protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/etcd.proto");
    let descriptors = protox::compile(["etcd.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
