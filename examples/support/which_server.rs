//! The Redis server an example runs on, said on the example's first line of output:
//! the one `REDIS_URL` names when that is set, else a throwaway `redis-server` the example
//! starts on a free loopback port (`tests/common/server.rs`). Included by each example
//! with `#[path]`, beside `server.rs`.

use crate::server::RedisServer;

/// The server to use and its URL, with the server the example started (kept until the
/// example ends, which stops it). Prints which one and why as the first line of output.
pub(crate) fn choose() -> Result<(Option<RedisServer>, String), String> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        let at = redis::Client::open(url.as_str())
            .map(|client| client.get_connection_info().addr().to_string())
            .map_err(|err| format!("REDIS_URL is not a Redis URL: {err}"))?;
        println!(
            "using the Redis server at {at}, because REDIS_URL is set (unset it to run on \
             a throwaway server the example starts)"
        );
        return Ok((None, url));
    }
    let server = RedisServer::try_start()?;
    let url = server.url();
    println!(
        "started a throwaway redis-server at {url}, because REDIS_URL is not set; it stops \
         when the example ends"
    );
    Ok((Some(server), url))
}
