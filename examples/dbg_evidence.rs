use tantivy_dedup::text::normalize;
use tantivy_dedup::verify::{Sketch, Verifier};
fn main() {
    let links = "本文扩展阅读：\n·全市重点项目建设进展情况通报\n·夏季用电高峰保供措施发布\n·城市公园绿地建设规划公示\n·中小企业纾困政策问答汇编";
    let a = "市交通运输局今天宣布，地铁六号线二期工程完成全部轨道铺设，预计年底开通试运营，沿线将新增站点九座，方便东部新城居民出行。";
    let b = "今年夏粮收购工作全面启动，全省设立收购网点一千余个，各地粮食部门延长收购时间，为农民售粮提供免费检测和烘干服务。";
    let s = |t: &str| Sketch::of(&[&normalize(t)], 200);
    let d = s(links);
    let x = s(&format!("{a}\n{links}"));
    let y = s(&format!("{b}\n{links}"));
    println!("d {} keys {:?}", d.hashes().len(), d.keys());
    println!("x {} keys {:?}", x.hashes().len(), x.keys());
    println!("y {} keys {:?}", y.hashes().len(), y.keys());
    let v = Verifier::default();
    println!(
        "x~d {:?} y~d {:?} x~y {:?}",
        v.verdict(&x, &d),
        v.verdict(&y, &d),
        v.verdict(&x, &y)
    );
}
