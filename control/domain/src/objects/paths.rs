//! Every object path the service writes, made here and nowhere else:
//!
//! | object | path |
//! |---|---|
//! | an uploaded audio file | `audio/<account_sid>/<aud_sid>.wav` |
//! | a call's recording | `calls/<account_sid>/<communication_sid>/recording.wav` |
//! | a call's saved history | `calls/<account_sid>/<communication_sid>.history.json` |
//! | the caller audio of listen turn n | `calls/<account_sid>/<communication_sid>/speech/<n>.wav` |
//!
//! The account sid is always the second segment, which is what [`owner_of`] reads. A
//! saved history names the objects it references bucket-qualified
//! (`callsmith/calls/…`, see [`bucket_reference`]).

/// Bucket label in front of object paths referenced from a saved history
/// (`speech_recognition_recording`), as `GET /v1/communication/{id}/speech-recording`
/// expects them.
pub const BUCKET: &str = "callsmith";

/// The account owning an object path by the `<kind>/<account_sid>/…` convention.
pub fn owner_of(path: &str) -> Option<&str> {
    let mut it = path.split('/');
    let _kind = it.next()?;
    let owner = it.next()?;
    it.next()?;
    (!owner.is_empty()).then_some(owner)
}

/// An uploaded audio file's object.
pub fn audio_file(account_sid: &str, audio_sid: &str) -> String {
    format!("audio/{account_sid}/{audio_sid}.wav")
}

/// `path` as a saved history references it.
pub fn bucket_reference(path: &str) -> String {
    format!("{BUCKET}/{path}")
}

/// The object path of a reference made by [`bucket_reference`].
pub fn strip_bucket(reference: &str) -> Option<&str> {
    reference.strip_prefix(BUCKET)?.strip_prefix('/')
}

/// The objects of one communication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallObjects {
    prefix: String,
}

impl CallObjects {
    pub fn new(account_sid: &str, communication_sid: &str) -> CallObjects {
        CallObjects {
            prefix: format!("calls/{account_sid}/{communication_sid}"),
        }
    }

    pub fn recording(&self) -> String {
        format!("{}/recording.wav", self.prefix)
    }

    /// Beside the call's folder rather than in it: every answered call saves a history,
    /// and a file needs no folder of its own made first (on a local store a new folder
    /// is a second inode per call).
    pub fn history(&self) -> String {
        format!("{}.history.json", self.prefix)
    }

    /// The caller audio of listen turn `index` (from 1).
    pub fn speech_turn(&self, index: usize) -> String {
        format!("{}/speech/{index}.wav", self.prefix)
    }

    /// Whether `path` is one of this call's turn recordings (and nothing that climbs out).
    pub fn is_speech_turn(&self, path: &str) -> bool {
        let Some(name) = path
            .strip_prefix(&self.prefix)
            .and_then(|r| r.strip_prefix("/speech/"))
        else {
            return false;
        };
        !name.is_empty() && !name.contains('/') && name != "." && name != ".."
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_objects_belong_to_their_account() {
        let c = CallObjects::new("acc_1", "com_2");
        for p in [c.recording(), c.history(), c.speech_turn(3)] {
            assert_eq!(owner_of(&p), Some("acc_1"), "{p}");
        }
        assert_eq!(c.speech_turn(3), "calls/acc_1/com_2/speech/3.wav");
        assert_eq!(c.history(), "calls/acc_1/com_2.history.json");
        assert_eq!(owner_of(&audio_file("acc_1", "aud_x")), Some("acc_1"));
    }

    #[test]
    fn speech_turn_references() {
        let c = CallObjects::new("acc_1", "com_2");
        let r = bucket_reference(&c.speech_turn(1));
        assert_eq!(r, "callsmith/calls/acc_1/com_2/speech/1.wav");
        let p = strip_bucket(&r).unwrap();
        assert!(c.is_speech_turn(p));
        for bad in [
            "calls/acc_1/com_2/recording.wav",
            "calls/acc_1/com_2/speech/",
            "calls/acc_1/com_2/speech/../history.json",
            "calls/acc_1/com_2/speech/..",
            "calls/acc_1/com_3/speech/1.wav",
        ] {
            assert!(!c.is_speech_turn(bad), "{bad}");
        }
        assert_eq!(strip_bucket("other/calls/x"), None);
    }
}
